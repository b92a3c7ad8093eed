package pi

import (
	"os"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

func TestReadCorpus(t *testing.T) {
	tests := []struct {
		file                                               string
		user, assistant, thinking, calls, results, notices int
		firstUser, lastText                                string
	}{
		{"branching.jsonl", 2, 2, 0, 0, 0, 0, "common prompt", "right branch answer"},
		{"compaction.jsonl", 2, 2, 0, 0, 0, 1, "first prompt before compaction", "second answer after compaction"},
		{"compaction_missing.jsonl", 2, 1, 0, 0, 0, 1, "prompt before compaction", ""},
		{"examples_native.jsonl", 1, 0, 0, 8, 8, 0, "", ""},
		{"fields.jsonl", 4, 2, 1, 1, 1, 2, "hello as a plain string", "compacted earlier"},
		{"full_format.jsonl", 4, 3, 1, 1, 1, 2, "Injected context from extension", "final answer"},
		{"multi_compaction.jsonl", 3, 2, 0, 0, 0, 2, "", ""},
		{"pi_two_turns_session.jsonl", 3, 3, 0, 1, 1, 0, "please USE_TOOL to say hi", ""},
		{"real_world.jsonl", 2, 1, 1, 2, 2, 1, "Read README.md and NOTES.md, then tell me what this project is about.", ""},
		{"sample.jsonl", 1, 1, 1, 1, 1, 0, "", ""},
		{"v1_legacy.jsonl", 1, 1, 0, 0, 0, 0, "legacy prompt", "legacy answer"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			msgs, err := Reader{}.Read("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckWellFormed(t, msgs)
			c := map[transcript.Kind]int{}
			for _, m := range msgs {
				c[m.Kind]++
				if m.Agent != Agent || m.NativeID == "" {
					t.Fatalf("message lacks agent or native id: %+v", m)
				}
			}
			got := [6]int{c[transcript.KindUser], c[transcript.KindAssistant], c[transcript.KindThinking], c[transcript.KindToolCall], c[transcript.KindToolResult], c[transcript.KindNotice]}
			if want := [6]int{tt.user, tt.assistant, tt.thinking, tt.calls, tt.results, tt.notices}; got != want {
				t.Fatalf("user/assistant/thinking/call/result/notice = %v, want %v", got, want)
			}
			if tt.firstUser != "" {
				for _, m := range msgs {
					if m.Kind == transcript.KindUser {
						if m.Text != tt.firstUser {
							t.Errorf("first user %q, want %q", m.Text, tt.firstUser)
						}
						break
					}
				}
			}
			if tt.lastText != "" && msgs[len(msgs)-1].Text != tt.lastText {
				t.Errorf("last message %q, want %q", msgs[len(msgs)-1].Text, tt.lastText)
			}
		})
	}
}

func TestDecodeCases(t *testing.T) {
	const h = `{"type":"session","version":3,"id":"s1","cwd":"/w"}` + "\n"
	tests := []struct {
		name    string
		in      string
		skipped int
		want    []string // kind:text (tool name, or result output)
	}{
		{"malformed lines skipped and counted", h + "{oops\n" + `{"no":"type"}` + "\n" +
			`{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}` + "\n",
			2, []string{"user:hi"}},
		{"leaf is the last line, file order otherwise free", h +
			`{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"two"}]}}` + "\n" +
			`{"type":"message","id":"x","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"other branch"}]}}` + "\n" +
			`{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"one"}}` + "\n" +
			`{"type":"message","id":"c","parentId":"b","message":{"role":"user","content":"three"}}` + "\n",
			0, []string{"user:one", "assistant:two", "user:three"}},
		{"a missing parent ends the chain like pi", h +
			`{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"lost"}}` + "\n" +
			`{"type":"message","id":"b","parentId":"gone","message":{"role":"user","content":"kept"}}` + "\n",
			0, []string{"user:kept"}},
		{"a parent cycle terminates", h +
			`{"type":"message","id":"a","parentId":"b","message":{"role":"user","content":"x"}}` + "\n" +
			`{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"y"}}` + "\n",
			0, []string{"user:x", "user:y"}},
		{"blocks in order, exit code kept, cast notices skipped", h +
			`{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"thinking","thinking":"","redacted":true},{"type":"text","text":"x"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"false"}}]}}` + "\n" +
			`{"type":"message","id":"b","parentId":"a","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"no"}],"isError":true,"details":{"exitCode":1}}}` + "\n" +
			`{"type":"custom","id":"c","parentId":"b","customType":"cast-notice","data":{"noticeType":"merge"}}` + "\n",
			0, []string{"thinking:t", "assistant:x", "tool_call:bash", "tool_result:no!1"}},
		{"bash executions as the model sees them", h +
			`{"type":"message","id":"a","parentId":null,"message":{"role":"bashExecution","command":"make","output":"","exitCode":2}}` + "\n" +
			`{"type":"message","id":"b","parentId":"a","message":{"role":"bashExecution","command":"secret","output":"x","excludeFromContext":true}}` + "\n",
			0, []string{"user:Ran `make`\n(no output)\n\nCommand exited with code 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d.Skipped != tt.skipped || d.SessionID != "s1" || d.Cwd != "/w" {
				t.Errorf("skipped %d (want %d), session %q, cwd %q", d.Skipped, tt.skipped, d.SessionID, d.Cwd)
			}
			agenttest.CheckWellFormed(t, d.Messages)
			var got []string
			for _, m := range d.Messages {
				s := m.Kind.String() + ":" + m.Text
				switch m.Kind {
				case transcript.KindToolCall:
					s = "tool_call:" + m.ToolCall.Name
				case transcript.KindToolResult:
					s = "tool_result:" + m.ToolResult.Output
					if m.ToolResult.IsError {
						s += "!"
					}
					if m.ToolResult.ExitCode != nil {
						s += string(rune('0' + *m.ToolResult.ExitCode))
					}
				}
				got = append(got, s)
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
	for _, in := range []string{"", "garbage\n{{{\n", `[1,2]`, `{"no":"type"}`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) did not fail", in)
		}
	}
}

func TestReadMissingFile(t *testing.T) {
	if _, err := (Reader{}).Read(t.TempDir() + "/none.jsonl"); !os.IsNotExist(err) {
		t.Fatalf("err = %v", err)
	}
}
