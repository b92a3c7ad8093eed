package grok

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

func TestReadCorpus(t *testing.T) {
	tests := []struct {
		dir                                       string
		skipped                                   int
		kind, id                                  string
		user, assistant, thinking, calls, results int
		errors                                    []string // call ids whose results failed
		firstUser                                 string
	}{
		{"session-basic", 0, "", "11111111-2222-7333-8444-555555555555", 2, 3, 1, 1, 1, nil, "read the README and tell me what it says"},
		{"session-tools", 0, "", "aaaaaaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee", 1, 2, 0, 5, 5, []string{"call-miss-1"}, "edit calc.py, run the tests, and search the web"},
		{"session-malformed", 1, "", "cccccccc-dddd-7eee-8fff-000000000000", 1, 1, 0, 0, 0, nil, "hello"},
		{"session-subagent", 0, "subagent", "99999999-8888-7777-6666-555555555555", 1, 1, 0, 0, 0, nil, "Count the files in /Users/dev/project and report the total."},
		{"session-noquery", 0, "", "dddddddd-eeee-7fff-8000-111111111111", 0, 0, 0, 0, 0, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			d, err := ReadSession("testdata/" + tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if d.Skipped != tt.skipped || d.Kind != tt.kind || d.SessionID != tt.id || d.Cwd != "/Users/dev/project" {
				t.Errorf("skipped %d kind %q id %q cwd %q", d.Skipped, d.Kind, d.SessionID, d.Cwd)
			}
			if d.Kinds["malformed line"] != tt.skipped || len(d.Kinds) > min(tt.skipped, 1) {
				t.Errorf("import report %v, want %d malformed lines and nothing else", d.Kinds, tt.skipped)
			}
			agenttest.CheckWellFormed(t, d.Messages)
			c := map[transcript.Kind]int{}
			failed := map[string]bool{}
			for _, m := range d.Messages {
				c[m.Kind]++
				if m.Agent != Agent || m.NativeID == "" {
					t.Fatalf("message lacks agent or native id: %+v", m)
				}
				if m.Kind == transcript.KindAssistant && m.Model != "grok-4.6" {
					t.Errorf("assistant model %q", m.Model)
				}
				if m.Kind == transcript.KindToolResult && m.ToolResult.IsError {
					failed[m.ToolResult.CallID] = true
				}
			}
			got := [5]int{c[transcript.KindUser], c[transcript.KindAssistant], c[transcript.KindThinking], c[transcript.KindToolCall], c[transcript.KindToolResult]}
			if want := [5]int{tt.user, tt.assistant, tt.thinking, tt.calls, tt.results}; got != want {
				t.Fatalf("user/assistant/thinking/call/result = %v, want %v", got, want)
			}
			if len(failed) != len(tt.errors) {
				t.Errorf("failed results %v, want %v", failed, tt.errors)
			}
			for _, id := range tt.errors {
				if !failed[id] {
					t.Errorf("result of %s not marked as an error", id)
				}
			}
			if tt.firstUser != "" && d.Messages[0].Text != tt.firstUser {
				t.Errorf("first message %q, want %q", d.Messages[0].Text, tt.firstUser)
			}
		})
	}
}

func TestReadAcceptsFileOrFolder(t *testing.T) {
	a, err := Reader{}.Read("testdata/session-basic")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Reader{}.Read("testdata/session-basic/chat_history.jsonl")
	if err != nil || len(a) != len(b) || len(a) == 0 {
		t.Fatalf("folder gave %d messages, file %d (%v)", len(a), len(b), err)
	}
}

func TestDecodeCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"synthetic and context user records are not prompts",
			`{"type":"user","content":[{"type":"text","text":"<system-reminder>\nx\n</system-reminder>"}],"synthetic_reason":"system_reminder"}` + "\n" +
				`{"type":"user","content":[{"type":"text","text":"<user_info>a</user_info>\n\n<rules>b</rules>"}]}` + "\n" +
				`{"type":"user","content":[{"type":"text","text":"<div>plain text after a tag</div> more"}]}` + "\n" +
				`{"type":"user","content":"<user_query>\nq\n</user_query>","prompt_index":0}` + "\n",
			[]string{"user:<div>plain text after a tag</div> more", "user:q"}},
		{"structured tool output is kept as JSON",
			`{"type":"assistant","content":"","tool_calls":[{"id":"c","name":"n","arguments":"not json"}]}` + "\n" +
				`{"type":"tool_result","tool_call_id":"c","content":{"files":["a"]}}` + "\n" +
				`{"type":"backend_tool_call","kind":{"tool_type":"web_search"}}` + "\n",
			[]string{"tool_call:n:not json", `tool_result:{"files":["a"]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode([]byte(tt.in), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range d.Messages {
				switch m.Kind {
				case transcript.KindToolCall:
					got = append(got, "tool_call:"+m.ToolCall.Name+":"+m.ToolCall.Input)
				case transcript.KindToolResult:
					got = append(got, "tool_result:"+m.ToolResult.Output)
				default:
					got = append(got, m.Kind.String()+":"+m.Text)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("message %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestDecodeNothingUsable(t *testing.T) {
	for _, in := range []string{"garbage\n{{{\n", `[1,2]`, `{"no":"type"}`} {
		if _, err := Decode([]byte(in), nil); err == nil {
			t.Errorf("Decode(%q) did not fail", in)
		}
	}
}

func TestReadMissing(t *testing.T) {
	if _, err := (Reader{}).Read(t.TempDir()); !os.IsNotExist(err) {
		t.Fatalf("err = %v", err)
	}
}

// A record type the reader does not know is counted for the import report;
// the CLI's own system prompt is known and not reported.
func TestDecodeCountsUnknownRecords(t *testing.T) {
	in := `{"type":"system","content":"you are grok"}
{"type":"user","content":"<user_query>GK-U1 hi</user_query>","prompt_index":0}
{"type":"hologram","content":"x"}
{"oops
`
	d, err := Decode([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Messages) != 1 || d.Messages[0].Text != "GK-U1 hi" {
		t.Fatalf("messages %+v", d.Messages)
	}
	if d.Kinds["hologram record"] != 1 || d.Kinds["malformed line"] != 1 || len(d.Kinds) != 2 {
		t.Errorf("import report %v", d.Kinds)
	}
}

// TestReadUpdatesOnly reads folders holding nothing but updates.jsonl, the
// log Grok documents as what drives /resume: streamed chunks are joined,
// a tool_call_update's status says whether the tool failed, and what is
// not conversation is counted, not dropped silently.
func TestReadUpdatesOnly(t *testing.T) {
	const sid = "0198a5b2-1111-7222-8333-444455556666"
	up := func(u string) string {
		return `{"timestamp":1786561752,"method":"session/update","params":{"sessionId":"` + sid + `","update":` + u + `}}`
	}
	lines := []string{
		up(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"count the "},"_meta":{"promptIndex":0}}`),
		up(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"lines MARK-U"}}`),
		up(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"use wc MARK-T"}}`),
		up(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Counting"},"_meta":{"modelId":"grok-4.6"}}`),
		up(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":" now. MARK-A"}}`),
		up(`{"sessionUpdate":"tool_call","toolCallId":"call-1","title":"Run wc","rawInput":{"command":"wc -l a"},"_meta":{"x.ai/tool":{"name":"run_terminal_command"}}}`),
		up(`{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"in_progress"}`),
		up(`{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"wc: a: No such file MARK-R"}}]}`),
		`not json`,
		up(`{"sessionUpdate":"hologram","x":1}`),
		`{"timestamp":1786561800,"method":"_x.ai/session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"turn_completed","stop_reason":"end_turn"}}}`,
	}
	dir := filepath.Join(t.TempDir(), sid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, UpdatesFile), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, UpdatesFile)} {
		d, err := ReadSession(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want := []agenttest.Core{
			{Kind: transcript.KindUser, Text: "count the lines MARK-U"},
			{Kind: transcript.KindAssistant, Text: "Counting now. MARK-A"},
			{Kind: transcript.KindToolCall, ToolCall: transcript.ToolCall{ID: "call-1", Name: "run_terminal_command", Input: `{"command":"wc -l a"}`}},
			{Kind: transcript.KindToolResult, ToolResult: transcript.ToolResult{CallID: "call-1", Output: "wc: a: No such file MARK-R", IsError: true}},
		}
		if got := cores(d.Messages); !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got %+v\nwant %+v", path, got, want)
		}
		if d.Messages[1].Kind != transcript.KindThinking || d.Messages[1].Text != "use wc MARK-T" {
			t.Errorf("thinking: %+v", d.Messages[1])
		}
		if d.SessionID != sid || d.Kinds["malformed line"] != 1 || d.Kinds["hologram update"] != 1 || len(d.Kinds) != 2 {
			t.Errorf("session %q, skipped %v", d.SessionID, d.Kinds)
		}
	}
}

// TestReadCorpusUpdatesOnly reads the sample session's updates.jsonl alone
// and finds the same prompts and answers its chat_history.jsonl holds.
func TestReadCorpusUpdatesOnly(t *testing.T) {
	full, err := Reader{}.Read(filepath.Join("testdata", "session-basic"))
	if err != nil {
		t.Fatal(err)
	}
	alone, err := Reader{}.Read(updatesOnly(t, filepath.Join("testdata", "session-basic")))
	if err != nil {
		t.Fatal(err)
	}
	texts := func(msgs []transcript.Message) []string {
		var out []string
		for _, m := range msgs {
			if m.Kind == transcript.KindUser || m.Kind == transcript.KindAssistant {
				out = append(out, fmt.Sprint(m.Kind)+": "+m.Text)
			}
		}
		return out
	}
	if g, w := texts(alone), texts(full); !reflect.DeepEqual(g, w) {
		t.Errorf("from updates.jsonl\n got %q\nwant %q", g, w)
	}
}
