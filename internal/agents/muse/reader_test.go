package muse

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/transcript"
)

// checkWellFormed asserts what every reader result must hold: valid
// messages from Muse with a native id, every result after its call, and
// (with paired) every call answered by exactly one result.
func checkWellFormed(t *testing.T, msgs []transcript.Message, paired bool) {
	t.Helper()
	calls := map[string]int{}
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Agent != Agent || m.NativeID == "" {
			t.Fatalf("message %d lacks agent or native id: %+v", i, m)
		}
		switch m.Kind {
		case transcript.KindToolCall:
			if _, dup := calls[m.ToolCall.ID]; dup {
				t.Errorf("message %d: call %q twice", i, m.ToolCall.ID)
			}
			calls[m.ToolCall.ID] = 0
		case transcript.KindToolResult:
			n, ok := calls[m.ToolResult.CallID]
			if !ok {
				t.Errorf("message %d: result for %q before any call", i, m.ToolResult.CallID)
			}
			calls[m.ToolResult.CallID] = n + 1
		}
	}
	if paired {
		for id, n := range calls {
			if n != 1 {
				t.Errorf("call %q has %d results", id, n)
			}
		}
	}
}

func counts(msgs []transcript.Message) [5]int {
	c := map[transcript.Kind]int{}
	for _, m := range msgs {
		c[m.Kind]++
	}
	return [5]int{c[transcript.KindUser], c[transcript.KindAssistant], c[transcript.KindThinking], c[transcript.KindToolCall], c[transcript.KindToolResult]}
}

func TestReadCorpus(t *testing.T) {
	tests := []struct {
		file                                      string
		skipped, foreign                          int
		id                                        string
		user, assistant, thinking, calls, results int
		errors                                    []string         // call ids whose results failed
		exits                                     map[string]int32 // call id -> exit code
		firstUser, lastAssistant                  string
	}{
		{"session-basic.jsonl", 0, 0, "11111111-2222-3333-4444-555555555555", 1, 1, 0, 1, 1, nil, nil,
			"Read notes.txt and summarize it.", "notes.txt lists alpha, beta and gamma."},
		{"session-malformed.jsonl", 1, 0, "55555555-6666-7777-8888-999999999999", 1, 1, 0, 0, 0, nil, nil,
			"Say hello.", "Hello."},
		{"session-multiturn.jsonl", 0, 0, "33333333-4444-5555-6666-777777777777", 2, 2, 0, 0, 0, nil, nil,
			"what tools do you have access to", "There are also goal, cron and subagent tools."},
		{"session-subagent-noise.jsonl", 0, 4, "44444444-5555-6666-7777-888888888888", 1, 1, 0, 1, 1, nil, nil,
			"Spawn a worker to write the report.", "The worker wrote the report."},
		{"session-tools.jsonl", 0, 0, "22222222-3333-4444-5555-666666666666", 1, 1, 0, 5, 5,
			[]string{"call_bash_fail", "call_read_missing"}, map[string]int32{"call_bash_ok": 0, "call_bash_fail": 5},
			"Run the tests, add sub() to src/calc.py and track the steps.", "Added sub() and noted that missing.txt does not exist."},
		{"session-truncated-task-first.jsonl", 0, 2, "99999999-aaaa-bbbb-cccc-dddddddddddd", 1, 1, 0, 0, 0, nil, nil,
			"the real user turn", "the real answer"},
	}
	files, _ := filepath.Glob("testdata/*.jsonl")
	if len(files) != len(tests) {
		t.Fatalf("%d corpus files, %d table rows", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if d.Skipped != tt.skipped || d.Foreign != tt.foreign || d.SessionID != tt.id ||
				d.Cwd != "/Users/dev/project" || d.Model != "muse-spark-1.2" {
				t.Errorf("skipped %d foreign %d id %q cwd %q model %q", d.Skipped, d.Foreign, d.SessionID, d.Cwd, d.Model)
			}
			checkWellFormed(t, d.Messages, true)
			if got, want := counts(d.Messages), [5]int{tt.user, tt.assistant, tt.thinking, tt.calls, tt.results}; got != want {
				t.Fatalf("user/assistant/thinking/call/result = %v, want %v", got, want)
			}
			failed := map[string]bool{}
			exits := map[string]int32{}
			var prev time.Time
			for i, m := range d.Messages {
				if m.Time.IsZero() || m.Time.Before(prev) {
					t.Errorf("message %d time %v (previous %v)", i, m.Time, prev)
				}
				prev = m.Time
				switch m.Kind {
				case transcript.KindUser:
					if m.Model != "" {
						t.Errorf("user message has model %q", m.Model)
					}
				case transcript.KindAssistant, transcript.KindToolCall:
					if m.Model != "muse-spark-1.2" {
						t.Errorf("%s model %q", m.Kind, m.Model)
					}
				case transcript.KindToolResult:
					if m.ToolResult.IsError {
						failed[m.ToolResult.CallID] = true
					}
					if ec := m.ToolResult.ExitCode; ec != nil {
						exits[m.ToolResult.CallID] = *ec
					}
				}
			}
			if len(failed) != len(tt.errors) {
				t.Errorf("failed results %v, want %v", failed, tt.errors)
			}
			for _, id := range tt.errors {
				if !failed[id] {
					t.Errorf("result of %s not marked as an error", id)
				}
			}
			if len(exits) != len(tt.exits) {
				t.Errorf("exit codes %v, want %v", exits, tt.exits)
			}
			for id, want := range tt.exits {
				if got, ok := exits[id]; !ok || got != want {
					t.Errorf("exit code of %s = %d (%v), want %d", id, got, ok, want)
				}
			}
			if first := d.Messages[0]; first.Kind != transcript.KindUser || first.Text != tt.firstUser {
				t.Errorf("first message %s %q, want user %q", first.Kind, first.Text, tt.firstUser)
			}
			if last := d.Messages[len(d.Messages)-1]; last.Kind != transcript.KindAssistant || last.Text != tt.lastAssistant {
				t.Errorf("last message %s %q, want assistant %q", last.Kind, last.Text, tt.lastAssistant)
			}
			// Reader.Read gives the same messages.
			msgs, err := Reader{}.Read("testdata/" + tt.file)
			if err != nil || len(msgs) != len(d.Messages) {
				t.Errorf("Read: %d messages, %v", len(msgs), err)
			}
		})
	}
}

// TestSubagentNeverRenders checks that nothing of a task stream (a
// subagent's prompt, prose or model) reaches the session's messages.
func TestSubagentNeverRenders(t *testing.T) {
	for _, f := range []string{"session-subagent-noise.jsonl", "session-truncated-task-first.jsonl"} {
		msgs, err := Reader{}.Read("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			for _, bad := range []string{"Subagent prose", "Role: demo-worker", "Wrote tool-demo", "must never render"} {
				if strings.Contains(m.Text, bad) {
					t.Errorf("%s: task stream text rendered: %q", f, m.Text)
				}
			}
			for _, bad := range []string{"rec-started-task", "rec-assistant-task", "r-1", "r-2"} {
				if m.NativeID == bad {
					t.Errorf("%s: task record %s rendered", f, bad)
				}
			}
		}
	}
}

func TestToolPairing(t *testing.T) {
	d, err := readFile(t, "testdata/session-tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	var got []string
	for _, m := range d.Messages {
		switch m.Kind {
		case transcript.KindToolCall:
			names[m.ToolCall.ID] = m.ToolCall.Name
			if !strings.HasPrefix(m.ToolCall.Input, "{") {
				t.Errorf("call %s input is not the JSON arguments: %q", m.ToolCall.ID, m.ToolCall.Input)
			}
		case transcript.KindToolResult:
			got = append(got, names[m.ToolResult.CallID]+":"+m.ToolResult.CallID)
			if m.NativeID != "rec-toolresults-1#result:"+m.ToolResult.CallID && m.NativeID != "rec-toolresults-2#result:"+m.ToolResult.CallID {
				t.Errorf("result native id %q", m.NativeID)
			}
		}
	}
	want := []string{"bash:call_bash_ok", "bash:call_bash_fail", "edit_file:call_edit", "write_todos:call_todos", "read_file:call_read_missing"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("results %v, want %v", got, want)
	}
}

func readFile(t *testing.T, name string) (Decoded, error) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return Decode(data)
}

// rec builds a session-stream record line.
func rec(id, stream string, seq int, event string) string {
	return `{"schema_version":1,"id":"` + id + `","stream":{"kind":"` + stream + `","id":"S-` + stream + `"},"sequence":` +
		itoa(seq) + `,"recorded_at":` + itoa(1786140000000000+seq*1000000) + `,"payload_type":"runtime.session","payload":{"kind":"run","run_id":"r","event":` + event + `}}` + "\n"
}

func meta(seq int, model string) string {
	return `{"schema_version":1,"id":"meta-` + itoa(seq) + `","stream":{"kind":"session","id":"S-session"},"sequence":` + itoa(seq) +
		`,"recorded_at":1786140000000000,"payload_type":"runtime.session.metadata","payload":{"kind":"metadata","record":{"model_id":"` + model + `","workspace_root":"/w"}}}` + "\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestDecodeCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"ordered by sequence, not file order",
			rec("c", "session", 3, `{"kind":"assistant_message_committed","text":"answer"}`) +
				rec("a", "session", 1, `{"kind":"started","prompt":"question"}`) +
				rec("b", "session", 2, `{"kind":"reasoning_committed","text":"pondering","encrypted_content":"x"}`),
			[]string{"user:question", "thinking:pondering", "assistant:answer"}},
		{"encrypted-only reasoning, empty prompts and bookkeeping are dropped",
			rec("a", "session", 1, `{"kind":"started","prompt":""}`) +
				rec("b", "session", 2, `{"kind":"reasoning_committed","text":"","encrypted_content":"x"}`) +
				rec("c", "session", 3, `{"kind":"model_completed","usage":{"input_tokens":1},"model":"m"}`) +
				rec("d", "session", 4, `{"kind":"terminal","terminal":"completed"}`) +
				rec("e", "session", 5, `{"kind":"assistant_message_committed","text":"ok"}`),
			[]string{"assistant:ok"}},
		{"results found by tool_call_index; object arguments kept as JSON",
			rec("a", "session", 1, `{"kind":"assistant_tool_calls_committed","message_id":"m1","tool_calls":[{"id":"fc_1","name":"read_file","args":{"path":"x"}},{"id":"fc_2","call_id":"c2","name":"bash","arguments":"{}"}]}`) +
				rec("b", "session", 2, `{"kind":"tool_result_batch_committed","batch_id":"m1","results":[{"tool_call_index":1,"text":"{\"exit_code\":0,\"output\":\"hi\"}"},{"tool_call_index":0,"text":"data"},{"tool_call_index":7,"text":"lost"}]}`),
			[]string{`tool_call:read_file:{"path":"x"}`, "tool_call:bash:{}", `tool_result:c2:{"exit_code":0,"output":"hi"}`, "tool_result:fc_1:data"}},
		{"task records and payload kind task never render",
			rec("t1", "task", 1, `{"kind":"started","prompt":"sub prompt"}`) +
				rec("a", "session", 1, `{"kind":"started","prompt":"mine"}`) +
				rec("t2", "task", 2, `{"kind":"assistant_message_committed","text":"sub prose"}`) +
				strings.Replace(rec("b", "session", 2, `{"kind":"status","status":"opening stream"}`), `"kind":"run"`, `"kind":"task"`, 1),
			[]string{"user:mine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			checkWellFormed(t, d.Messages, false)
			var got []string
			for _, m := range d.Messages {
				switch m.Kind {
				case transcript.KindToolCall:
					got = append(got, "tool_call:"+m.ToolCall.Name+":"+m.ToolCall.Input)
				case transcript.KindToolResult:
					got = append(got, "tool_result:"+m.ToolResult.CallID+":"+m.ToolResult.Output)
				default:
					got = append(got, m.Kind.String()+":"+m.Text)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModelAndTime(t *testing.T) {
	in := meta(1, "muse-a") +
		rec("u", "session", 2, `{"kind":"started","prompt":"p"}`) +
		rec("a1", "session", 3, `{"kind":"assistant_message_committed","text":"one"}`) +
		meta(4, "muse-b") +
		rec("a2", "session", 5, `{"kind":"assistant_message_committed","text":"two"}`)
	d, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if d.Model != "muse-a" || d.Cwd != "/w" || d.SessionID != "S-session" || len(d.Messages) != 3 {
		t.Fatalf("model %q cwd %q id %q, %d messages", d.Model, d.Cwd, d.SessionID, len(d.Messages))
	}
	if m := d.Messages[1]; m.Model != "muse-a" || m.NativeID != "a1" ||
		!m.Time.Equal(time.Date(2026, 8, 7, 22, 0, 3, 0, time.UTC)) || m.Time.Location() != time.UTC {
		t.Errorf("first answer: model %q native id %q time %v", m.Model, m.NativeID, m.Time)
	}
	if m := d.Messages[2]; m.Model != "muse-b" {
		t.Errorf("answer after the model change has model %q", m.Model)
	}
	// Without metadata the first model_completed names the model.
	d, err = Decode([]byte(rec("a", "session", 1, `{"kind":"assistant_message_committed","text":"x"}`) +
		rec("b", "session", 2, `{"kind":"model_completed","model":"muse-c"}`)))
	if err != nil || d.Model != "muse-c" || d.Messages[0].Model != "muse-c" {
		t.Errorf("without metadata: model %q, message model %q (%v)", d.Model, d.Messages[0].Model, err)
	}
}

func TestMalformedLinesCounted(t *testing.T) {
	good := rec("a", "session", 1, `{"kind":"started","prompt":"p"}`)
	in := "not json\n" + good +
		`{"stream":{"kind":"session","id":"S-session"},"payload_type":"runtime.session"}` + "\n" + // no sequence
		`{"schema_version":1,"id":"x","sequence":2,"payload_type":"runtime.session"}` + "\n" + // no stream
		`[1,2,3]` + "\n" + `{"id":"tr` + "\n\n"
	d, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if d.Skipped != 5 || len(d.Messages) != 1 || d.Messages[0].Text != "p" {
		t.Fatalf("skipped %d, messages %+v", d.Skipped, d.Messages)
	}
	if d.Kinds["malformed line"] != 5 || len(d.Kinds) != 1 {
		t.Errorf("import report %v, want 5 malformed lines", d.Kinds)
	}
}

func TestDecodeNothingUsable(t *testing.T) {
	for _, in := range []string{"garbage\n{{{\n", `[1,2]`, `{"no":"envelope"}`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) did not fail", in)
		}
	}
	if d, err := Decode(nil); err != nil || len(d.Messages) != 0 {
		t.Errorf("empty file: %v, %d messages", err, len(d.Messages))
	}
}

func TestReadMissing(t *testing.T) {
	if _, err := (Reader{}).Read(filepath.Join(t.TempDir(), "none.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("err = %v", err)
	}
}
