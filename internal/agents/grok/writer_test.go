package grok

import (
	"encoding/json"
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

// cores is what must survive a round trip (agenttest.Core); thinking is
// not written for Grok.
func cores(msgs []transcript.Message) []agenttest.Core {
	return agenttest.Cores(msgs, false, transcript.KindThinking)
}

var (
	user, asst   = agenttest.User, agenttest.Asst
	call, result = agenttest.Call, agenttest.ToolResult
)

func target(t *testing.T) agents.Target {
	return agents.Target{Home: filepath.Join(t.TempDir(), ".grok"), Cwd: "/Users/dev/my project", SessionID: "sess-1"}
}

func TestRoundTrip(t *testing.T) {
	tests := append([]agenttest.RoundTrip{
		agenttest.Trip("plain turns", []transcript.Message{user("hello"), asst("hi"), user(""), asst("two"), asst("answers")}, nil),
		agenttest.Trip("text, calls, results, errors", []transcript.Message{
			user("list"), asst("listing"), call("c1", "run_terminal_command", `{"command":"ls"}`),
			call("c2", "read_file", `{"target_file":"a"}`), result("c1", "a b", false), result("c2", "File not found", true), asst("done"),
		}, nil),
		agenttest.Trip("thinking is left out", []transcript.Message{user("u"), {Kind: transcript.KindThinking, Text: "hmm"}, asst("a")}, nil),
		agenttest.Trip("a call after a result is a new record", []transcript.Message{
			user("go"), call("c1", "ls", `{}`), result("c1", "x", false), call("c2", "ls", `{}`), result("c2", "y", false),
		}, nil),
		agenttest.Trip("user text with tags and wrappers survives", []transcript.Message{
			user("<user_info>not context</user_info>"), asst("a"), user("say </user_query> twice </user_query>"), asst("b"), user("\n/x\n"),
		}, nil),
		agenttest.Trip("orphan result becomes a prompt", []transcript.Message{user("u"), result("zz", "out", false)},
			[]transcript.Message{user("u"), user("[Result of tool call zz, whose call is not in this history]\nout")}),
		agenttest.Trip("foreign names and inputs are made acceptable", []transcript.Message{
			user("u"), call("toolu_1", "mcp.fs:read", `["a"]`), result("toolu_1", "ok", false), call("c2", "Bash", `oops`), result("c2", "ok", false),
		}, []transcript.Message{
			user("u"), call("toolu_1", "mcp_fs_read", `{"input":["a"]}`), result("toolu_1", "ok", false),
			call("c2", "Bash", `{"input":"oops"}`), result("c2", "ok", false),
		}),
		agenttest.Trip("internal rows and notices are not written", []transcript.Message{
			user("u"), {Kind: transcript.KindInternal, Text: "secret"}, {Kind: transcript.KindNotice, NoticeType: transcript.NoticeFork, Text: "forked"}, asst("a"),
		}, []transcript.Message{user("u"), asst("a")}),
	}, agenttest.PairingTrips(OrphanCallOutput)...)
	agenttest.CheckRoundTrips(t, agenttest.Codec{Target: target, Writer: Writer{}, Read: readDir, Cores: cores, Check: checkChat,
		Hidden: []string{"secret", "forked"}, After: func(t *testing.T, w agents.Written, want []transcript.Message) {
			// The same conversation from a folder holding only the
			// updates.jsonl the writer wrote next to it.
			fromLog, err := Reader{}.Read(updatesOnly(t, filepath.Dir(w.Path)))
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckWellFormed(t, fromLog)
			if g, w := cores(fromLog), cores(want); !reflect.DeepEqual(g, w) {
				t.Errorf("round trip through updates.jsonl\n got %+v\nwant %+v", g, w)
			}
		}}, tests)
}

// updatesOnly copies dir's updates.jsonl alone into a new session folder.
func updatesOnly(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, UpdatesFile))
	if err != nil {
		t.Fatalf("the writer wrote no %s: %v", UpdatesFile, err)
	}
	only := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.MkdirAll(only, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(only, UpdatesFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return only
}

// checkChat holds a written chat_history.jsonl to the shapes of the
// samples: wrapped prompts with consecutive prompt_index values, string
// arguments holding JSON objects, every result right after its call.
func checkChat(t *testing.T, data []byte) {
	t.Helper()
	next := 0
	pending := map[string]bool{}
	for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if r.Type != "tool_result" && len(pending) > 0 {
			t.Fatalf("line %d: %s before the results of %v", i+1, r.Type, pending)
		}
		switch r.Type {
		case "user":
			if r.PromptIndex == nil || *r.PromptIndex != next || !strings.Contains(contentText(r.Content), queryOpen) {
				t.Fatalf("line %d: prompt not wrapped or not index %d: %s", i+1, next, l)
			}
			next++
		case "assistant":
			for _, c := range r.ToolCalls {
				var obj map[string]any
				if json.Unmarshal([]byte(c.Arguments), &obj) != nil {
					t.Fatalf("line %d: arguments %q not a JSON object", i+1, c.Arguments)
				}
				pending[c.ID] = true
			}
		case "tool_result":
			if !pending[r.ToolCallID] {
				t.Fatalf("line %d: result not right after its call", i+1)
			}
			delete(pending, r.ToolCallID)
		default:
			t.Fatalf("line %d: unexpected record type %q", i+1, r.Type)
		}
	}
}

func TestCorpusRoundTrip(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/session-*")
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			src, err := ReadSession(dir)
			if err != nil {
				t.Fatal(err)
			}
			tg := target(t)
			tg.Cwd, tg.NativeID = src.Cwd, src.SessionID
			w, err := Writer{}.Write(tg, src.Messages)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(w.Path)
			checkChat(t, data)
			back, err := ReadSession(filepath.Dir(w.Path))
			if err != nil {
				t.Fatal(err)
			}
			if back.SessionID != src.SessionID || back.Cwd != src.Cwd {
				t.Errorf("summary id/cwd %q %q, want %q %q", back.SessionID, back.Cwd, src.SessionID, src.Cwd)
			}
			if g, w := cores(back.Messages), cores(src.Messages); !reflect.DeepEqual(g, w) {
				t.Errorf("round trip changed the conversation\n got %+v\nwant %+v", g, w)
			}
		})
	}
}

func TestWriterLayout(t *testing.T) {
	tg := target(t)
	tg.Model = "grok-4.6"
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := []transcript.Message{user("Read   the\nREADME please"), asst("ok")}
	w, err := Writer{Now: func() time.Time { return fixed }}.Write(tg, msgs)
	if err != nil {
		t.Fatal(err)
	}
	sid := repair.StableUUID("grok:" + tg.SessionID)
	want := filepath.Join(tg.Home, "sessions", "%2FUsers%2Fdev%2Fmy%20project", sid, "chat_history.jsonl")
	if w.Path != want || w.NativeID != sid {
		t.Fatalf("wrote %s (%s), want %s (%s)", w.Path, w.NativeID, want, sid)
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(w.Path), "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Info.ID != sid || s.Info.Cwd != tg.Cwd || s.SessionSummary != "Read the README please" || s.CurrentModelID != "grok-4.6" ||
		s.ChatFormatVersion != 1 || s.NumChatMessages != 2 || s.CreatedAt != "2026-01-02T03:04:05.000000Z" {
		t.Fatalf("summary %+v", s)
	}
}

func TestProjectDir(t *testing.T) {
	tests := []struct{ cwd, want string }{
		{"/Users/dev/project", "%2FUsers%2Fdev%2Fproject"},
		{"/a b/ü~x_y.z-1", "%2Fa%20b%2F%C3%BC~x_y.z-1"},
	}
	for _, tt := range tests {
		if got := projectDir(tt.cwd); got != tt.want {
			t.Errorf("projectDir(%q) = %q, want %q", tt.cwd, got, tt.want)
		}
	}
}

func TestWriterRejectsBadTarget(t *testing.T) { agenttest.CheckRejectsBadTarget(t, Writer{}) }

// readDir reads the session folder a written chat_history.jsonl is in.
func readDir(_ *testing.T, path string) ([]transcript.Message, error) {
	return Reader{}.Read(filepath.Dir(path))
}
