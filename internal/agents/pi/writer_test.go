package pi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/transcript"
)

// cores is what must survive a round trip (agenttest.Core), exit codes
// included; notices only withNotices.
func cores(msgs []transcript.Message, withNotices bool) []agenttest.Core {
	if withNotices {
		return agenttest.Cores(msgs, true)
	}
	return agenttest.Cores(msgs, true, transcript.KindNotice)
}

var (
	user, asst, think = agenttest.User, agenttest.Asst, agenttest.Think
	call, result      = agenttest.Call, agenttest.ToolResult
)

func target(t *testing.T) agents.Target {
	return agents.Target{Home: filepath.Join(t.TempDir(), "agent"), Cwd: filepath.Join(t.TempDir(), "proj"), SessionID: "sess-1"}
}

func TestRoundTrip(t *testing.T) {
	exit := int32(3)
	withExit := result("c1", "failed", true)
	withExit.ToolResult.ExitCode = &exit
	tests := append([]agenttest.RoundTrip{
		agenttest.Trip("plain turns", []transcript.Message{user("hello"), asst("hi"), user(""), asst("")}, nil),
		agenttest.Trip("thinking, text, calls, results", []transcript.Message{
			user("list"), think("plan"), asst("listing"), call("c1", "bash", `{"command":"ls"}`),
			call("c2", "read", `{"path":"a"}`), result("c1", "a b", false), result("c2", "nope", true), asst("done"),
		}, nil),
		agenttest.Trip("exit codes survive", []transcript.Message{user("u"), call("c1", "bash", `{}`), withExit}, nil),
		agenttest.Trip("a call after a result is a new message", []transcript.Message{
			user("go"), call("c1", "ls", `{}`), result("c1", "x", false), call("c2", "ls", `{}`), result("c2", "y", false),
		}, nil),
		agenttest.Trip("orphan result becomes text", []transcript.Message{user("u"), result("zz", "out", true)},
			[]transcript.Message{user("u"), user("[Error from tool call zz, whose call is not in this history]\nout")}),
		agenttest.Trip("foreign names and inputs are made acceptable", []transcript.Message{
			user("u"), call("toolu_1", "mcp.fs:read", `["a"]`), result("toolu_1", "ok", false), call("c2", "run", `not json`), result("c2", "ok", false),
		}, []transcript.Message{
			user("u"), call("toolu_1", "mcp_fs_read", `{"input":["a"]}`), result("toolu_1", "ok", false),
			call("c2", "run", `{"input":"not json"}`), result("c2", "ok", false),
		}),
		agenttest.Trip("internal rows and notices are not read back", []transcript.Message{
			user("u"), {Kind: transcript.KindInternal, Text: "secret"}, {Kind: transcript.KindNotice, NoticeType: transcript.NoticeMerge, Text: "merged"}, asst("a"),
		}, []transcript.Message{user("u"), asst("a")}),
	}, agenttest.PairingTrips(OrphanCallOutput)...)
	agenttest.CheckRoundTrips(t, agenttest.Codec{Target: target, Writer: Writer{}, Read: read, Check: checkFile, Hidden: []string{"secret"},
		Cores: func(msgs []transcript.Message) []agenttest.Core { return cores(msgs, true) }}, tests)
}

// checkFile holds a written file to pi's hard requirements: header first
// with version 3, an unbroken linear chain ending at the last line,
// assistant content arrays with usage, results right after their call.
func checkFile(t *testing.T, data []byte) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var h header
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.Type != "session" || h.Version != 3 || h.ID == "" {
		t.Fatalf("bad header %s", lines[0])
	}
	prev := ""
	pending := map[string]bool{}
	for i, l := range lines[1:] {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatalf("line %d: %v", i+2, err)
		}
		var e entry
		_ = json.Unmarshal([]byte(l), &e)
		if e.ID == "" || (prev == "") != (e.ParentID == nil) || (e.ParentID != nil && *e.ParentID != prev) {
			t.Fatalf("line %d breaks the chain: %s", i+2, l)
		}
		prev = e.ID
		if e.Message == nil {
			continue
		}
		switch e.Message.Role {
		case "assistant":
			if len(pending) > 0 {
				t.Fatalf("line %d: assistant before the results of %v", i+2, pending)
			}
			if e.Message.Usage == nil || e.Message.StopReason == "" || !strings.HasPrefix(string(e.Message.Content), "[") {
				t.Fatalf("line %d: assistant without usage, stop reason or content array: %s", i+2, l)
			}
			for _, b := range parseBlocks(e.Message.Content, func(string) {}) {
				if b.Type == "toolCall" {
					pending[b.ID] = true
				}
			}
		case "toolResult":
			if !pending[e.Message.ToolCallID] {
				t.Fatalf("line %d: result not right after its call", i+2)
			}
			delete(pending, e.Message.ToolCallID)
		default:
			if len(pending) > 0 {
				t.Fatalf("line %d: %s before the results of %v", i+2, e.Message.Role, pending)
			}
		}
	}
}

func TestCorpusRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := Reader{}.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Writer{}.Write(target(t), src)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(w.Path)
			checkFile(t, data)
			back, err := Reader{}.Read(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			// Notices are cast's own; pi keeps them out of the model context.
			if g, w := cores(back, false), cores(src, false); !reflect.DeepEqual(g, w) {
				t.Errorf("round trip changed the conversation\n got %+v\nwant %+v", g, w)
			}
		})
	}
}

func TestWriterLayout(t *testing.T) {
	tg := target(t)
	tg.Model = "fake/fake-model"
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 600e6, time.UTC)
	w, err := Writer{Now: func() time.Time { return fixed }}.Write(tg, []transcript.Message{user("hi")})
	if err != nil {
		t.Fatal(err)
	}
	sid := repair.StableUUID("pi:" + tg.SessionID)
	enc := "--" + strings.ReplaceAll(strings.TrimPrefix(tg.Cwd, "/"), "/", "-") + "--"
	wantPath := filepath.Join(tg.Home, "sessions", enc, "2026-01-02T03-04-05-600Z_"+sid+".jsonl")
	if w.Path != wantPath || w.NativeID != sid {
		t.Fatalf("wrote %s (%s), want %s (%s)", w.Path, w.NativeID, wantPath, sid)
	}
	data, _ := os.ReadFile(w.Path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var e entry
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil || e.Type != "model_change" || e.Provider != "fake" || e.ModelID != "fake-model" {
		t.Fatalf("second line %s, want a model_change", lines[1])
	}
	var h header
	if json.Unmarshal([]byte(lines[0]), &h); h.Cwd != tg.Cwd {
		t.Fatalf("header cwd %q", h.Cwd)
	}

	// Writing again with the native id replaces the same file.
	tg.NativeID = sid
	w2, err := Writer{}.Write(tg, []transcript.Message{user("hi"), asst("there")})
	if err != nil || w2.Path != w.Path {
		t.Fatalf("rewrite went to %s (%v), want %s", w2.Path, err, w.Path)
	}
}

func TestSessionDir(t *testing.T) {
	tests := []struct{ cwd, want string }{
		{"/work/a b", "--work-a b--"},
		{"/", "----"},
		{`C:\x\y`, "--C--x-y--"},
	}
	for _, tt := range tests {
		if got := filepath.Base(SessionDir("/h", tt.cwd)); got != tt.want {
			t.Errorf("SessionDir(%q) = %q, want %q", tt.cwd, got, tt.want)
		}
	}
}

func TestWriterRejectsBadTarget(t *testing.T) { agenttest.CheckRejectsBadTarget(t, Writer{}) }

// Entry ids are 8 hex digits, as pi's: in session collide-7561 entries
// 964 and 1391 hash to the same one, and a writer that kept both ids lost
// the entries between them on reading (the parent chain jumps); among
// 100,000 entries a collision is about even odds.
func TestWriterEntryIDsNeverRepeat(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	var msgs []transcript.Message
	for i := range 1400 {
		m := user(fmt.Sprintf("question %d", i))
		if i%2 == 1 {
			m = asst(fmt.Sprintf("answer %d", i))
		}
		msgs = append(msgs, m)
	}
	out, err := Writer{}.Write(agents.Target{Home: home, Cwd: cwd, NativeID: "collide-7561"}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Reader{}.Read(out.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cores(back, false), cores(msgs, false)) {
		t.Fatalf("read back %d of %d messages", len(back), len(msgs))
	}
}

func read(_ *testing.T, path string) ([]transcript.Message, error) { return Reader{}.Read(path) }
