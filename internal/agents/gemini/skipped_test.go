package gemini

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// What a Gemini CLI session holds that the reader does not know (a newer
// record type, a line of an unknown shape, a broken line) is counted, not
// dropped silently; the CLI's own UI records are known and not reported.
func TestDecodeCountsWhatItSkips(t *testing.T) {
	lines := []string{
		`{"sessionId":"s1","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"main"}`,
		`{"id":"r1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":"GSK-U1 hello"}]}`,
		`{"id":"r2","timestamp":"2026-11-30T10:00:02.000Z","type":"info","content":"UI only"}`,
		`{"id":"r3","timestamp":"2026-11-30T10:00:03.000Z","type":"gemini","content":"GSK-A1 hi","model":"m"}`,
		`{"id":"r4","timestamp":"2026-11-30T10:00:04.000Z","type":"hologram","content":"x"}`,
		`{"$future":{"x":1}}`,
		`{"oops`,
	}
	d, err := Decode([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckReport(t, d.Messages, d.Kinds, []string{"user GSK-U1 hello", "assistant GSK-A1 hi"},
		map[string]int{"hologram record": 1, "line of an unknown shape": 1, "malformed line": 1})
}

// Parts a record leaves out while keeping the rest are counted by kind: an
// image a read tool returned with its result, an image the user attached,
// a result without an id, a part that does not decode, a message without
// an id (records are found by id).
func TestDecodeCountsPartsItLeavesOut(t *testing.T) {
	lines := []string{
		`{"sessionId":"s1","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"main"}`,
		`{"id":"r1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":"GLO-U1 see"},{"inlineData":{"mimeType":"image/png","data":"iVBOR"}},7]}`,
		`{"id":"r2","timestamp":"2026-11-30T10:00:02.000Z","type":"gemini","content":"","model":"m","toolCalls":[{"id":"c1","name":"read_file","args":{"file_path":"a.png"},"status":"success",` +
			`"result":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"GLO-R1 read"}}},{"inlineData":{"mimeType":"image/png","data":"iVBOR"}}]}]}`,
		`{"id":"r3","timestamp":"2026-11-30T10:00:03.000Z","type":"user","content":[{"functionResponse":{"name":"read_file","response":{"output":"x"}}},{"text":"GLO-U2 next"}]}`,
		`{"$set":{"messages":[{"type":"user","content":"GLO-LOST"}]}}`,
	}
	d, err := Decode([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	// The $set replaced every message with one that has no id.
	agenttest.CheckReport(t, d.Messages, d.Kinds, nil, map[string]int{"message without an id": 1})

	d, err = Decode([]byte(strings.Join(lines[:4], "\n")))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckReport(t, d.Messages, d.Kinds, []string{"user GLO-U1 see", "tool_call ", "tool_result ", "user GLO-U2 next"},
		map[string]int{"image part (inlineData)": 2, "content part that did not decode": 1, "tool result without an id": 1})
}

// A line of a known shape that does not decode (a field of another JSON
// type) is counted by what it was, apart from broken lines.
func TestDecodeCountsDecodingFailuresByKind(t *testing.T) {
	const head = `{"sessionId":"s1","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"main"}`
	const user = `{"id":"r1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":"GDF-U1 hello"}`
	for _, tc := range []struct {
		name, line string
		skipped    map[string]int
	}{
		{"a message record", `{"id":"r2","type":"gemini","model":7,"content":"x"}`, map[string]int{"message record that did not decode": 1}},
		{"a $set record", `{"$set":{"sessionId":5}}`, map[string]int{"$set record that did not decode": 1}},
		{"a header", `{"sessionId":"s2","messages":{"id":"x"}}`, map[string]int{"session header that did not decode": 1}},
		{"content that does not decode", `{"id":"r2","type":"gemini","model":"m","content":7}`, map[string]int{"content part that did not decode": 1}},
		{"a broken line", `{"id":"r2",`, map[string]int{"malformed line": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decode([]byte(head + "\n" + user + "\n" + tc.line))
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckReport(t, d.Messages, d.Kinds, []string{"user GDF-U1 hello"}, tc.skipped)
		})
	}
}
