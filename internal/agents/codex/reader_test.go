package codex

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

// brief renders messages one per line so a whole transcript compares in one
// readable diff.
func brief(msgs []transcript.Message) []string {
	var out []string
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			out = append(out, fmt.Sprintf("tool_call %s %s %s", m.ToolCall.ID, m.ToolCall.Name, m.ToolCall.Input))
		case transcript.KindToolResult:
			ec := "-"
			if m.ToolResult.ExitCode != nil {
				ec = fmt.Sprint(*m.ToolResult.ExitCode)
			}
			out = append(out, fmt.Sprintf("tool_result %s exit=%s err=%v %s", m.ToolResult.CallID, ec, m.ToolResult.IsError, m.ToolResult.Output))
		case transcript.KindNotice:
			out = append(out, fmt.Sprintf("notice %s %s", m.NoticeType, m.Text))
		default:
			out = append(out, fmt.Sprintf("%s %s", m.Kind, m.Text))
		}
	}
	return out
}

func TestReadCorpus(t *testing.T) {
	tests := []struct {
		file    string
		id      string
		skipped int
		want    []string
	}{
		{
			file: "corpus/sessions/2026/01/02/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
			id:   "11111111-1111-4111-8111-111111111111",
			want: []string{
				"user List the synthetic files.",
				"thinking I will inspect the synthetic directory.",
				`tool_call call-structured-001 exec_command {"cmd":"find . -maxdepth 1 -type f"}`,
				"tool_result call-structured-001 exit=- err=false ./alpha.txt\n./beta.txt",
				`tool_call call-custom-001 apply_patch "*** Begin Patch\n*** Add File: gamma.txt\n+synthetic\n*** End Patch"`,
				"tool_result call-custom-001 exit=- err=false Done!",
				`tool_call call-mcp-001 mcp__synthetic__lookup {"query":"fixture"}`,
				`tool_result call-mcp-001 exit=- err=false {"status":"ok"}`,
				"assistant The synthetic files are alpha.txt and beta.txt.",
			},
		},
		{
			file: "corpus/sessions/2026/01/03/rollout-2026-01-03T04-05-06-22222222-2222-4222-8222-222222222222.jsonl",
			id:   "22222222-2222-4222-8222-222222222222",
			want: []string{
				"user Spawn a synthetic researcher.",
				`tool_call call-spawn-001 spawn_agent {"task_name":"synthetic_researcher","message":"Inspect fixtures."}`,
				"tool_result call-spawn-001 exit=- err=false agent 33333333-3333-4333-8333-333333333333 spawned",
			},
		},
		{
			file: "corpus/sessions/2026/01/03/rollout-2026-01-03T04-05-10-33333333-3333-4333-8333-333333333333.jsonl",
			id:   "33333333-3333-4333-8333-333333333333",
			want: []string{
				"user Spawn a synthetic researcher.",
				`tool_call call-spawn-001 spawn_agent {"task_name":"synthetic_researcher","message":"Inspect fixtures."}`,
				"user Inspect fixtures.",
				"assistant The fixtures are fully synthetic.",
			},
		},
		{
			file: "corpus/sessions/rollout-44444444-4444-4444-8444-444444444444.jsonl",
			id:   "44444444-4444-4444-8444-444444444444",
			want: []string{
				"user Open the synthetic legacy session.",
				"assistant The synthetic legacy session is open.",
			},
		},
		{
			file: "corpus/archived_sessions/rollout-55555555-5555-4555-8555-555555555555.jsonl",
			id:   "55555555-5555-4555-8555-555555555555",
			want: []string{"user Archived synthetic prompt."},
		},
		{
			file:    "corpus/malformed/rollout-66666666-6666-4666-8666-666666666666.jsonl",
			id:      "66666666-6666-4666-8666-666666666666",
			skipped: 1,
			want:    []string{"user Safe line before malformed input."},
		},
		{
			file: "examples/codex_rollout_2turn_with_tool.trimmed.jsonl",
			id:   "01a22a33-dd04-75c0-829d-bf9dec41183f",
			want: []string{
				"user RUN_TOOL: please run a shell command",
				`tool_call call_fake_29 exec_command {"cmd": "echo tool-ran-ok"}`,
				"tool_result call_fake_29 exit=- err=false Chunk ID: 3eea45\nWall time: 0.0000 seconds\nProcess exited wi...<114 chars>",
				"assistant FAKE-REPLY n=30: saw 6 input items; last user said: RUN_TOOL...<88 chars>",
				"user second turn: what did the tool print?",
				"assistant FAKE-REPLY n=31: saw 8 input items; last user said: second t...<89 chars>",
			},
		},
		{
			file: "examples/codex_handwritten_full.rollout.jsonl",
			id:   "e07de13b-a40e-4662-b394-a1f003fa5f5f",
			want: []string{
				"user HANDWRITTEN-U1: please create a file called notes.txt",
				"assistant HANDWRITTEN-A1: I will create it.",
				"user HANDWRITTEN-U2: now list the directory",
				`tool_call call_hand_1 exec_command {"cmd": "ls"}`,
				"tool_result call_hand_1 exit=- err=false HANDWRITTEN-TOOL-OUTPUT: notes.txt\n",
				"assistant HANDWRITTEN-A2: the directory contains notes.txt",
				"user HANDWRITTEN-U3: thanks, summarise",
				"assistant HANDWRITTEN-A3: we created notes.txt and listed the dir.",
			},
		},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p, err := Parse(f)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.SessionID != tc.id {
				t.Errorf("session id = %q, want %q", p.SessionID, tc.id)
			}
			if p.Skipped != tc.skipped {
				t.Errorf("skipped = %d, want %d", p.Skipped, tc.skipped)
			}
			got := brief(p.Messages)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("messages:\n got: %q\nwant: %q", got, tc.want)
			}
			for i, m := range p.Messages {
				if err := m.Validate(); err != nil {
					t.Errorf("message %d invalid: %v", i, err)
				}
				if m.Agent != Agent || m.NativeID == "" {
					t.Errorf("message %d: agent %q native id %q", i, m.Agent, m.NativeID)
				}
			}
		})
	}
}

// Every rollout in testdata is read without error: a new corpus file is
// covered without editing the table above.
func TestReadEveryTestdataFile(t *testing.T) {
	n := 0
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		n++
		msgs, err := Reader{}.Read(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if len(msgs) == 0 {
			t.Errorf("%s: no messages", path)
		}
		return nil
	})
	if err != nil || n < 8 {
		t.Fatalf("walked %d files: %v", n, err)
	}
}

func TestReadShapes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  bool
	}{
		{
			name: "exit code from unified exec output",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"Chunk ID: x\nProcess exited with code 2\nOutput:\nboom"}}`,
			want: []string{"tool_call c1 exec_command {}", "tool_result c1 exit=2 err=false Chunk ID: x\nProcess exited with code 2\nOutput:\nboom"},
		},
		{
			name: "exit code from old shell tool json",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"false\"]}","call_id":"c1"}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.1}}"}}`,
			want: []string{`tool_call c1 shell {"command":["false"]}`, `tool_result c1 exit=1 err=false `},
		},
		{
			name: "mcp output mentioning exit code is not parsed",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","name":"mcp__x__y","arguments":"{}","call_id":"c1"}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"Exit code: 3"}}`,
			want: []string{"tool_call c1 mcp__x__y {}", "tool_result c1 exit=- err=false Exit code: 3"},
		},
		{
			name: "local shell call and object output with success false",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"local_shell_call","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"]}}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":{"content":"denied","success":false}}}`,
			want: []string{`tool_call c1 local_shell {"type":"exec","command":["ls"]}`, "tool_result c1 exit=- err=true denied"},
		},
		{
			name: "harness and developer messages skipped, notices kept",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n<cwd>/x</cwd></environment_context>"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<cast_notice type=\"agent_switch\">\nswitched from claude\n</cast_notice>"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"compacted","payload":{"message":"summary of before"}}`,
			want: []string{"notice agent_switch switched from claude", "notice compaction_summary summary of before"},
		},
		{
			// Codex keeps the user's messages verbatim beside its summary
			// (replacement_history); a rebuild from the summary on must
			// carry them, as the summary does not hold them.
			name: "compacted keeps the user messages Codex kept",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"first ask"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"compacted","payload":{"message":"Summary: done a","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"first ask"}]},{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n</environment_context>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"second ask"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"Summary: done a"}]}]}}`,
			want: []string{"user first ask", "notice compaction_summary Summary: done a\n\nThe user's messages before this summary, kept with it:\n\nfirst ask\n\nsecond ask"},
		},
		{
			// Codex records the model's answer to its compaction prompt as
			// an assistant message, then the same summary, prefixed, in
			// the compacted record: one summary, not an answer too.
			name: "compaction answer is the summary",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"real answer"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Progress: a done"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"compacted","payload":{"message":"Another model summarized:\nProgress: a done"}}`,
			want: []string{"assistant real answer", "notice compaction_summary Another model summarized:\nProgress: a done"},
		},
		{
			name: "event duplicates of items are dropped, lone events kept",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"user_message","message":"hi"}}
{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"agent_message","message":"only in the ui"}}
{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"user_message","message":"hi"}}`,
			want: []string{"user hi", "assistant only in the ui", "user hi"},
		},
		{
			// Codex 0.147's UI copies: PascalCase items, "text" blocks for
			// the user and "Text" for the agent; deduplicated against the
			// response_items like the older events, kept where alone.
			name: "item_completed messages are events too",
			in: `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}}
{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","id":"u1","content":[{"type":"text","text":"fix it"}]}}}
{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"AgentMessage","id":"a1","content":[{"type":"Text","text":"looking"}],"phase":"commentary"}}}
{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"CommandExecution","id":"c1","command":"ls"}}}
{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"AgentMessage","id":"a2","content":[{"type":"Text","text":"done"}],"phase":"final_answer"}}}`,
			want: []string{"user fix it", "assistant looking", "assistant done"},
		},
		{
			name: "only garbage is an error",
			in:   "not json\n[1]\n42\n",
			err:  true,
		},
		{
			name: "empty file is no error",
			in:   "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}
