package gemini

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

// cores is what must survive a round trip (agenttest.Core).
func cores(msgs []transcript.Message) []agenttest.Core { return agenttest.Cores(msgs, false) }

var (
	user, asst, think = agenttest.User, agenttest.Asst, agenttest.Think
	call, result      = agenttest.Call, agenttest.ToolResult
)

func target(t *testing.T) agents.Target {
	return agents.Target{Home: filepath.Join(t.TempDir(), ".gemini"), Cwd: filepath.Join(t.TempDir(), "My Project"), SessionID: "sess-1"}
}

// roundTrips are the writer's inputs and what reads back; TestWriterSameBytes
// also pins the bytes written for them.
var roundTrips = append([]agenttest.RoundTrip{
	agenttest.Trip("plain turns", []transcript.Message{user("hello"), asst("hi"), user("bye"), asst("ciao")}, nil),
	agenttest.Trip("thinking, text, calls, results", []transcript.Message{
		user("list"), think("plan"), asst("listing"), call("c1", "run_shell_command", `{"command":"ls"}`),
		call("c2", "read_file", `{"file_path":"a"}`), result("c1", "a b", false), result("c2", "nope", true), asst("done"),
	}, nil),
	agenttest.Trip("a call after a result is a new turn", []transcript.Message{
		user("go"), call("c1", "ls", `{}`), result("c1", "x", false), call("c2", "ls", `{}`), result("c2", "y", false),
	}, nil),
	agenttest.Trip("commands and empty text are escaped and come back", []transcript.Message{
		user("/tmp/x is broken"), asst("a"), user("? why"), asst("b"), user(""), asst("c"), user(`\/literal`), asst("d"),
		user("<session_context> mine"), asst("e"),
	}, nil),
	agenttest.Trip("orphan result becomes text", []transcript.Message{user("u"), result("zz", "out", false)},
		[]transcript.Message{user("u"), user("[Result of tool call zz, whose call is not in this history]\nout")}),
	agenttest.Trip("foreign names and inputs are made acceptable", []transcript.Message{
		user("u"), call("toolu_1", "mcp/plugin x", `["a"]`), result("toolu_1", "ok", false), call("c2", "9lives", `not json`), result("c2", "ok", false),
	}, []transcript.Message{
		user("u"), call("toolu_1", "mcp_plugin_x", `{"input":["a"]}`), result("toolu_1", "ok", false),
		call("c2", "_9lives", `{"input":"not json"}`), result("c2", "ok", false),
	}),
	agenttest.Trip("internal rows and notices are not read back", []transcript.Message{
		user("u"), {Kind: transcript.KindInternal, Text: "secret"}, {Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "claude -> gemini"}, asst("a"),
	}, []transcript.Message{user("u"), asst("a")}),
}, agenttest.PairingTrips(OrphanCallOutput)...)

func TestRoundTrip(t *testing.T) {
	agenttest.CheckRoundTrips(t, agenttest.Codec{Target: target, Writer: Writer{}, Read: read, Cores: cores, Hidden: []string{"secret"}}, roundTrips)
}

func read(_ *testing.T, path string) ([]transcript.Message, error) { return Reader{}.Read(path) }

// An answer of the text Gemini makes up to close an interrupted turn,
// written with no model to record (no target model, another agent's
// message without one), read back as the CLI's own turn and was lost.
func TestWriterAnswerIsTheInterruptedPlaceholder(t *testing.T) {
	msgs := []transcript.Message{user("say it"), asst(interruptedPlaceholder)}
	w, err := Writer{}.Write(target(t), msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Reader{}.Read(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cores(got), cores(msgs)) {
		t.Fatalf("read back %+v, want %+v", cores(got), cores(msgs))
	}
}

func TestCorpusRoundTrip(t *testing.T) {
	for _, f := range []string{"testdata/gemini.jsonl", "testdata/test_conversation_gemini.json"} {
		t.Run(f, func(t *testing.T) {
			src, err := Reader{}.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Writer{}.Write(target(t), src)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Reader{}.Read(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := cores(back), cores(src); !reflect.DeepEqual(g, w) {
				t.Errorf("round trip changed the conversation: %d vs %d messages", len(g), len(w))
			}
			for i := range back {
				if !back[i].Time.Equal(src[i].Time) || back[i].Model != src[i].Model {
					t.Fatalf("message %d: time/model %v %q, want %v %q", i, back[i].Time, back[i].Model, src[i].Time, src[i].Model)
				}
			}
		})
	}
}

func TestWriterLayout(t *testing.T) {
	tg := target(t)
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := Writer{Now: func() time.Time { return fixed }}.Write(tg, []transcript.Message{user("hi")})
	if err != nil {
		t.Fatal(err)
	}
	sid := repair.StableUUID("gemini:" + tg.SessionID)
	wantPath := filepath.Join(tg.Home, "tmp", "my-project", "chats", "session-2026-01-02T03-04-"+sid[:8]+".jsonl")
	if w.Path != wantPath || w.NativeID != sid {
		t.Fatalf("wrote %s (%s), want %s (%s)", w.Path, w.NativeID, wantPath, sid)
	}
	for _, base := range []string{"tmp", "history"} {
		owner, err := os.ReadFile(filepath.Join(tg.Home, base, "my-project", ".project_root"))
		if err != nil || string(owner) != tg.Cwd {
			t.Fatalf("%s marker = %q, %v", base, owner, err)
		}
	}
	data, _ := os.ReadFile(w.Path)
	var h header
	first, _, _ := strings.Cut(string(data), "\n")
	if err := json.Unmarshal([]byte(first), &h); err != nil || h.SessionID != sid || h.ProjectHash != projectHash(tg.Cwd) || h.Kind != "main" {
		t.Fatalf("header %s: %+v %v", first, h, err)
	}

	// Writing again with the native id replaces the same file.
	tg.NativeID = sid
	later := fixed.Add(time.Hour)
	w2, err := Writer{Now: func() time.Time { return later }}.Write(tg, []transcript.Message{user("hi"), asst("there")})
	if err != nil || w2.Path != w.Path {
		t.Fatalf("rewrite went to %s (%v), want %s", w2.Path, err, w.Path)
	}

	// Another project with the same base name gets the next slug.
	other := agents.Target{Home: tg.Home, Cwd: filepath.Join(t.TempDir(), "my project"), SessionID: "s2"}
	w3, err := Writer{}.Write(other, []transcript.Message{user("x")})
	if err != nil || !strings.Contains(w3.Path, filepath.Join("tmp", "my-project-1", "chats")) {
		t.Fatalf("second project written to %s (%v)", w3.Path, err)
	}
}

func TestWriterRejectsBadTarget(t *testing.T) { agenttest.CheckRejectsBadTarget(t, Writer{}) }

func TestEscape(t *testing.T) {
	tests := []struct{ in, out string }{
		{"hello", "hello"},
		{"/tmp/x", `\/tmp/x`},
		{"  ?what", `\  ?what`},
		{"", `\`},
		{"  \n", "\\  \n"},
		{"<hook_context>x", `\<hook_context>x`},
		{`\n is a newline`, `\n is a newline`},
		{`\/x`, `\\/x`},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.out {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.out)
		}
		if got := Unescape(tt.out); got != tt.in {
			t.Errorf("Unescape(%q) = %q, want %q", tt.out, got, tt.in)
		}
		if cliIgnores(tt.out) {
			t.Errorf("escaped %q would still be dropped", tt.out)
		}
	}
}

// A rewrite in a later minute finds the file the first write named, for
// any native id: the name's short id and the lookup's are one (shortID),
// so no id leaves a second file holding the same session.
func TestRewriteFindsTheFileForAnyID(t *testing.T) {
	first := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	for _, id := range []string{
		"0123abcd-0000-4000-8000-000000000000", // the CLI's own: a UUID
		"ab/cd/efgh-1",                         // a slash, which the name cannot hold
		"a[b]*?cd-9",                           // what a glob would read as a pattern
		"short",                                // under 8 characters
	} {
		t.Run(id, func(t *testing.T) {
			tg := target(t)
			tg.NativeID = id
			w, err := Writer{Now: func() time.Time { return first }}.Write(tg, []transcript.Message{user("hi")})
			if err != nil {
				t.Fatal(err)
			}
			w2, err := Writer{Now: func() time.Time { return first.Add(time.Hour) }}.Write(tg, []transcript.Message{user("hi"), asst("there")})
			if err != nil {
				t.Fatal(err)
			}
			if w2.Path != w.Path {
				t.Errorf("rewrite went to %s, want %s", w2.Path, w.Path)
			}
			files, _ := filepath.Glob(filepath.Join(filepath.Dir(w.Path), "*"))
			if len(files) != 1 {
				t.Errorf("chats holds %v; want the one file", files)
			}
			if got := (Driver{}).FindSession(tg.Home, id); got != w.Path {
				t.Errorf("FindSession = %q, want %s", got, w.Path)
			}
		})
	}
}
