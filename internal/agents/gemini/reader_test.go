package gemini

import (
	"os"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

func kinds(msgs []transcript.Message) map[transcript.Kind]int {
	c := map[transcript.Kind]int{}
	for _, m := range msgs {
		c[m.Kind]++
	}
	return c
}

func TestReadCorpus(t *testing.T) {
	tests := []struct {
		file                                      string
		user, assistant, thinking, calls, results int
		firstUser                                 string
	}{
		{"testdata/gemini.jsonl", 3, 2, 7, 12, 12, "\nYou are an AI agent that brings the power of Gemini"},
		{"testdata/test_conversation_gemini.json", 1, 13, 24, 0, 0, "## 任務："},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			msgs, err := Reader{}.Read(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckWellFormed(t, msgs)
			k := kinds(msgs)
			got := []int{k[transcript.KindUser], k[transcript.KindAssistant], k[transcript.KindThinking], k[transcript.KindToolCall], k[transcript.KindToolResult]}
			want := []int{tt.user, tt.assistant, tt.thinking, tt.calls, tt.results}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("counts user/assistant/thinking/call/result = %v, want %v", got, want)
				}
			}
			if !strings.HasPrefix(msgs[0].Text, tt.firstUser) {
				t.Errorf("first user text %q", msgs[0].Text[:40])
			}
			for _, m := range msgs {
				if m.Agent != Agent || m.NativeID == "" || m.Time.IsZero() {
					t.Fatalf("message lacks agent, native id or time: %+v", m)
				}
			}
		})
	}
}

func TestDecodeReplay(t *testing.T) {
	const h = `{"sessionId":"s1","projectHash":"x"}` + "\n"
	type want struct {
		kind transcript.Kind
		text string // text, tool name, or result output
	}
	tests := []struct {
		name    string
		in      string
		skipped int
		want    []want
	}{
		{"upsert keeps first position and last content", h +
			`{"id":"a","type":"user","content":[{"text":"hi"}]}` + "\n" +
			`{"id":"b","type":"gemini","content":""}` + "\n" +
			`{"id":"c","type":"user","content":"again"}` + "\n" +
			`{"id":"b","type":"gemini","content":"done"}` + "\n",
			0, []want{{transcript.KindUser, "hi"}, {transcript.KindAssistant, "done"}, {transcript.KindUser, "again"}}},
		{"rewind truncates at the id", h +
			`{"id":"a","type":"user","content":"one"}` + "\n" +
			`{"id":"b","type":"gemini","content":"two"}` + "\n" +
			`{"$rewindTo":"b"}` + "\n" +
			`{"id":"c","type":"gemini","content":"three"}` + "\n",
			0, []want{{transcript.KindUser, "one"}, {transcript.KindAssistant, "three"}}},
		{"rewind to an unknown id clears", h +
			`{"id":"a","type":"user","content":"one"}` + "\n" + `{"$rewindTo":"zz"}` + "\n",
			0, nil},
		{"$set messages replaces the list", h +
			`{"id":"a","type":"user","content":"old"}` + "\n" +
			`{"$set":{"messages":[{"id":"m","type":"user","content":"new"}],"lastUpdated":"x"}}` + "\n",
			0, []want{{transcript.KindUser, "new"}}},
		{"malformed lines are skipped and counted", h +
			"{not json\n" + `["array"]` + "\n" +
			`{"id":"a","type":"user","content":"ok"}` + "\n",
			2, []want{{transcript.KindUser, "ok"}}},
		{"regenerated context and UI rows are left out", h +
			`{"id":"a","type":"user","content":[{"text":"<session_context>\nx</session_context>"}]}` + "\n" +
			`{"id":"b","type":"info","content":"Request cancelled."}` + "\n" +
			`{"id":"c","type":"error","content":"boom"}` + "\n" +
			`{"id":"d","type":"user","content":"real"}` + "\n",
			0, []want{{transcript.KindUser, "real"}}},
		// Gemini closes a history that ends with a tool result (a turn
		// interrupted after its tool ran) with a model turn of its own
		// before the next prompt, which its rewrite of the session writes
		// out: context it makes again on every run, not an answer (read as
		// one, it came before the prompt and the turn's prompt was stored
		// as a second user message).
		{"the placeholder closing an interrupted turn is left out", h +
			`{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"go"}]},` +
			`{"id":"g","type":"gemini","content":[{"functionCall":{"id":"c1","name":"ls","args":{}}}]},` +
			`{"id":"g_response","type":"user","content":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}]},` +
			`{"id":"p","type":"gemini","content":[{"text":"[The previous response was interrupted before it completed.]"}]},` +
			`{"id":"b","type":"user","content":[{"text":"next"}]}]}}` + "\n",
			0, []want{{transcript.KindUser, "go"}, {transcript.KindToolCall, "ls"}, {transcript.KindToolResult, "a b"}, {transcript.KindUser, "next"}}},
		// A model's answer of that very text is an answer: Gemini records
		// it with the model that gave it, and its own closing turn only
		// after a tool's response; a resume writes the answer anew without
		// its model.
		{"an answer of the placeholder's text is kept", h +
			`{"id":"a","type":"user","content":[{"text":"say it"}]}` + "\n" +
			`{"id":"b","type":"gemini","content":"[The previous response was interrupted before it completed.]","thoughts":[],"model":"gemini-2.5-pro"}` + "\n",
			0, []want{{transcript.KindUser, "say it"}, {transcript.KindAssistant, "[The previous response was interrupted before it completed.]"}}},
		{"an answer of the placeholder's text, the session resumed, is kept", h +
			`{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"say it"}]},` +
			`{"id":"b","type":"gemini","content":[{"text":"[The previous response was interrupted before it completed.]"}]}]}}` + "\n",
			0, []want{{transcript.KindUser, "say it"}, {transcript.KindAssistant, "[The previous response was interrupted before it completed.]"}}},
		{"an answer of the placeholder's text to a tool's response is kept", h +
			`{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"go"}]},` +
			`{"id":"g","type":"gemini","content":[{"functionCall":{"id":"c1","name":"ls","args":{}}}],"model":"gemini-2.5-pro"},` +
			`{"id":"g_response","type":"user","content":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}]},` +
			`{"id":"b","type":"gemini","content":[{"text":"[The previous response was interrupted before it completed.]"}],"model":"gemini-2.5-pro"}]}}` + "\n",
			0, []want{{transcript.KindUser, "go"}, {transcript.KindToolCall, "ls"}, {transcript.KindToolResult, "a b"}, {transcript.KindAssistant, "[The previous response was interrupted before it completed.]"}}},
		// Gemini compresses the older part of a long history into a user
		// record it answers itself, with no model: a compaction summary.
		{"a compressed history's summary is a compaction summary", h +
			`{"$set":{"messages":[{"id":"s","type":"user","content":[{"text":"<state_snapshot>we listed files</state_snapshot>"}]},` +
			`{"id":"k","type":"gemini","content":[{"text":"Got it. Thanks for the additional context!"}]},` +
			`{"id":"a","type":"user","content":[{"text":"next"}]}]}}` + "\n",
			0, []want{{transcript.KindNotice, "<state_snapshot>we listed files</state_snapshot>"}, {transcript.KindUser, "next"}}},
		{"a model's answer of the compression's words is an answer", h +
			`{"id":"a","type":"user","content":[{"text":"say it"}]}` + "\n" +
			`{"id":"b","type":"gemini","content":"Got it. Thanks for the additional context!","model":"gemini-2.5-pro"}` + "\n",
			0, []want{{transcript.KindUser, "say it"}, {transcript.KindAssistant, "Got it. Thanks for the additional context!"}}},
		{"escaped user text is unescaped", h +
			`{"id":"a","type":"user","content":"\\/tmp/x is broken"}` + "\n",
			0, []want{{transcript.KindUser, "/tmp/x is broken"}}},
		{"tool call with string result, error status", h +
			`{"id":"g","type":"gemini","content":"running","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"ls"},"result":"boom","status":"error"}]}` + "\n",
			0, []want{{transcript.KindAssistant, "running"}, {transcript.KindToolCall, "run_shell_command"}, {transcript.KindToolResult, "boom!"}}},
		{"api parts form, response record deduplicated", h +
			`{"id":"g","type":"gemini","content":[{"text":"t","thought":true},{"functionCall":{"id":"c1","name":"ls","args":{}}}],"toolCalls":[{"id":"c1","name":"ls","args":{},"result":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}]}]}` + "\n" +
			`{"id":"g_response","type":"user","content":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}]}` + "\n",
			0, []want{{transcript.KindThinking, "t"}, {transcript.KindToolCall, "ls"}, {transcript.KindToolResult, "a b"}}},
		// Gemini's own rewrite of a resumed session (its $set messages)
		// repeats a call's result, picture and all, as "<id>_response": the
		// picture is the result's, read with it, not a user message (read as
		// one, a sync took it for a new prompt and ran a turn on it).
		{"response record with the result's image deduplicated", h +
			`{"id":"g","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"read_file","args":{},"result":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":""}}},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}],"status":"success"}]}` + "\n" +
			`{"id":"g_response","type":"user","content":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":""}}},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}]}` + "\n",
			0, []want{{transcript.KindToolCall, "read_file"}, {transcript.KindToolResult, ""}}},
		{"separate functionResponse record only", h +
			`{"id":"g","type":"gemini","content":[{"functionCall":{"id":"c1","name":"ls","args":{}}}]}` + "\n" +
			`{"id":"r","type":"user","content":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"x","exit":1}}}]}` + "\n",
			0, []want{{transcript.KindToolCall, "ls"}, {transcript.KindToolResult, `{"output":"x","exit":1}`}}},
		{"thoughts render like the CLI", h +
			`{"id":"g","type":"gemini","content":"a","thoughts":[{"subject":"S","description":"d"},{"subject":"","description":"only"}]}` + "\n",
			0, []want{{transcript.KindThinking, "**S** d"}, {transcript.KindThinking, "only"}, {transcript.KindAssistant, "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d.Skipped != tt.skipped {
				t.Errorf("skipped %d, want %d", d.Skipped, tt.skipped)
			}
			if d.SessionID != "s1" {
				t.Errorf("session id %q", d.SessionID)
			}
			agenttest.CheckWellFormed(t, d.Messages)
			if len(d.Messages) != len(tt.want) {
				t.Fatalf("got %d messages %+v, want %d", len(d.Messages), d.Messages, len(tt.want))
			}
			for i, w := range tt.want {
				m := d.Messages[i]
				got := m.Text
				switch m.Kind {
				case transcript.KindToolCall:
					got = m.ToolCall.Name
				case transcript.KindToolResult:
					got = m.ToolResult.Output
					if m.ToolResult.IsError {
						got += "!"
					}
				}
				if m.Kind != w.kind || got != w.text {
					t.Errorf("message %d = %s %q, want %s %q", i, m.Kind, got, w.kind, w.text)
				}
			}
		})
	}
}

func TestDecodeNothingUsable(t *testing.T) {
	for _, in := range []string{"", "garbage\n{{{\n", `[1,2]`} {
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
