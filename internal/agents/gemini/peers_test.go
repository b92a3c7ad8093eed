package gemini

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

// A toolCalls entry without an id (agentsview's fixture, testdata/NOTICE.md)
// is kept, under an id made from its place in the file: the same on every
// read, so a rewrite of the session keeps pointing at the same call.
func TestPeerToolCallWithoutID(t *testing.T) {
	path := filepath.Join("testdata", "agentsview", "tool_calls.json")
	var ids []string
	for range 2 {
		msgs, skipped, err := Reader{}.ReadReport(path)
		if err != nil {
			t.Fatal(err)
		}
		agenttest.CheckReport(t, msgs, skipped,
			[]string{"user Read this file", "thinking **Planning** I need to read the file first.", "assistant Let me read it.", "tool_call "}, nil)
		c := msgs[len(msgs)-1].ToolCall
		if c == nil || c.ID == "" || c.Name != "read_file" || c.Input != `{"file_path":"main.go"}` {
			t.Fatalf("call read as %+v", c)
		}
		ids = append(ids, c.ID)
	}
	if ids[0] != ids[1] {
		t.Errorf("the made id changed between reads: %q, %q", ids[0], ids[1])
	}
}

// Calls without ids pair with their results: one whose result the entry
// holds, and API-form calls answered by id-less functionResponses of the
// same tool, in order (Gemini pairs them by name). A response no id-less
// call of its tool is waiting for is counted.
func TestToolCallsWithoutIDsPairWithTheirResults(t *testing.T) {
	lines := []string{
		`{"sessionId":"s1","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"main"}`,
		`{"id":"u1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":"NOID-U1 go"}`,
		`{"id":"g1","timestamp":"2026-11-30T10:00:02.000Z","type":"gemini","content":"","model":"m","toolCalls":[` +
			`{"name":"ls","args":{},"status":"success","result":[{"functionResponse":{"name":"ls","response":{"output":"NOID-R1"}}}]}]}`,
		`{"id":"g2","timestamp":"2026-11-30T10:00:03.000Z","type":"gemini","model":"m","content":[` +
			`{"functionCall":{"name":"cat","args":{"f":"a"}}},{"functionCall":{"name":"cat","args":{"f":"b"}}}]}`,
		`{"id":"u2","timestamp":"2026-11-30T10:00:04.000Z","type":"user","content":[` +
			`{"functionResponse":{"name":"cat","response":{"output":"NOID-A"}}},{"functionResponse":{"name":"cat","response":{"output":"NOID-B"}}},` +
			`{"functionResponse":{"name":"grep","response":{"output":"NOID-LOST"}}}]}`,
	}
	d, err := Decode([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckReport(t, d.Messages, d.Kinds,
		[]string{"user NOID-U1 go", "tool_call ", "tool_result ", "tool_call ", "tool_call ", "tool_result ", "tool_result "},
		map[string]int{"tool result without an id": 1})
	agenttest.CheckWellFormed(t, d.Messages)
	pairs := map[string]string{} // call input -> result output
	calls := map[string]string{}
	for _, m := range d.Messages {
		switch m.Kind {
		case transcript.KindToolCall:
			calls[m.ToolCall.ID] = m.ToolCall.Name + m.ToolCall.Input
		case transcript.KindToolResult:
			pairs[calls[m.ToolResult.CallID]] = m.ToolResult.Output
		}
	}
	want := map[string]string{"ls{}": "NOID-R1", `cat{"f":"a"}`: "NOID-A", `cat{"f":"b"}`: "NOID-B"}
	if len(pairs) != len(want) {
		t.Fatalf("pairs %v, want %v", pairs, want)
	}
	for k, v := range want {
		if pairs[k] != v {
			t.Errorf("call %s answered by %q, want %q", k, pairs[k], v)
		}
	}
}
