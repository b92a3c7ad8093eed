package grok

import (
	"reflect"
	"strings"
	"testing"
)

// A tool call or result without the id that pairs them is counted, in the
// chat history and in the updates log alike, not dropped silently; a tool
// still running is no result yet and not reported.
func TestReadersCountCallsWithoutIDs(t *testing.T) {
	chat := `{"type":"user","content":"<user_query>GLO-U1 go</user_query>","prompt_index":0}
{"type":"assistant","content":"GLO-A1 ok","tool_calls":[{"id":"","name":"run","arguments":"{}"},{"id":"c1","name":"run","arguments":"{}"}]}
{"type":"tool_result","content":"orphan"}
{"type":"tool_result","tool_call_id":"c1","content":"GLO-R1"}
`
	d, err := Decode([]byte(chat), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"tool call without an id or name": 1, "tool result without a call id": 1}
	if len(d.Messages) != 4 || !reflect.DeepEqual(map[string]int(d.Kinds), want) {
		t.Errorf("chat history: %d messages, skipped %v; want 4, %v", len(d.Messages), d.Kinds, want)
	}

	up := func(u string) string {
		return `{"timestamp":1786561800,"method":"session/update","params":{"sessionId":"s1","update":` + u + `}}`
	}
	updates := strings.Join([]string{
		up(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"GLO-U1 go"}}`),
		up(`{"sessionUpdate":"tool_call","title":"run","rawInput":{}}`),
		up(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"run","rawInput":{}}`),
		up(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress"}`),
		up(`{"sessionUpdate":"tool_call_update","status":"completed","content":[]}`),
		up(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"GLO-R1"}}]}`),
	}, "\n")
	d, err = DecodeUpdates(strings.NewReader(updates))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Messages) != 3 || !reflect.DeepEqual(map[string]int(d.Kinds), want) {
		t.Errorf("updates: %d messages, skipped %v; want 3, %v", len(d.Messages), d.Kinds, want)
	}
}

// A chat record of a known type that does not decode is counted as that
// type's decoding failure, apart from broken lines.
func TestDecodeCountsDecodingFailuresByKind(t *testing.T) {
	const user = `{"type":"user","content":"<user_query>GDF-U1 go</user_query>","prompt_index":0}`
	for _, tc := range []struct {
		name, line string
		skipped    map[string]int
	}{
		{"an assistant record", `{"type":"assistant","content":"x","tool_calls":{"id":"c1"}}`, map[string]int{"assistant record that did not decode": 1}},
		{"a broken line", `{"type":"assistant",`, map[string]int{"malformed line": 1}},
		{"an untyped line", `{"content":"x"}`, map[string]int{"malformed line": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decode([]byte(user+"\n"+tc.line+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Messages) != 1 || !reflect.DeepEqual(map[string]int(d.Kinds), tc.skipped) {
				t.Errorf("%d messages, skipped %v; want 1, %v", len(d.Messages), d.Kinds, tc.skipped)
			}
		})
	}
}
