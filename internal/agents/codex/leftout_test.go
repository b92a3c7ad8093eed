package codex

import (
	"reflect"
	"strings"
	"testing"
)

// What a rollout holds that the reader leaves out is counted by kind, a
// record of a known type that does not decode included: a call or output
// without its id, a message of an unknown role, a payload of the wrong
// shape.
func TestParseCountsWhatItLeavesOut(t *testing.T) {
	const ts = `{"timestamp":"2026-11-30T10:00:00.000Z",`
	lines := []string{
		ts + `"type":"session_meta","payload":{"id":"lo-1","cwd":"/w"}}`,
		ts + `"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"LO-U1 go"}]}}`,
		ts + `"type":"response_item","payload":{"type":"message","role":"critic","content":[{"type":"output_text","text":"LO-C1"}]}}`,
		ts + `"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{}"}}`,
		ts + `"type":"response_item","payload":{"type":"function_call_output","output":"LO-OUT"}}`,
		ts + `"type":"response_item","payload":{"type":"message","role":5,"content":[{"type":"output_text","text":"LO-X"}]}}`,
		ts + `"type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"enc"}}`,
		ts + `"type":"event_msg","payload":"not an object"}`,
		ts + `"type":"turn_context","payload":{"model":42}}`,
		ts + `"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"LO-A1 done"}]}}`,
	}
	p, err := Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := brief(p.Messages), []string{"user LO-U1 go", "assistant LO-A1 done"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got: %q\nwant: %q", got, want)
	}
	want := map[string]int{
		"critic message":                   1,
		"tool call without an id or name":  1,
		"tool output without a call id":    1,
		"message item that did not decode": 1,
		"event_msg that did not decode":    1,
		"turn_context that did not decode": 1,
	}
	if !reflect.DeepEqual(map[string]int(p.Kinds), want) {
		t.Errorf("skipped %v, want %v", p.Kinds, want)
	}
}

// Lines of a legacy rollout (a bare header, then bare items) and message
// content of a shape the reader cannot read are counted, not lost; the
// legacy CLI's state snapshots are known and not reported.
func TestParseCountsLegacyAndShapelessLines(t *testing.T) {
	const user = `{"type":"message","role":"user","content":[{"type":"input_text","text":"LG-U1 go"}]}`
	for _, tc := range []struct {
		name    string
		lines   []string
		want    []string
		skipped map[string]int
	}{
		{"legacy state snapshot", []string{`{"id":"lg-1","timestamp":"2025-05-01T10:00:00Z"}`, user, `{"record_type":"state"}`},
			[]string{"user LG-U1 go"}, nil},
		{"legacy line of no known shape", []string{`{"id":"lg-1","timestamp":"2025-05-01T10:00:00Z"}`, user, `{"note":"x"}`},
			[]string{"user LG-U1 go"}, map[string]int{"untyped record": 1}},
		{"message content that is an object", []string{user, `{"type":"message","role":"assistant","content":{"text":"LG-A1"}}`},
			[]string{"user LG-U1 go"}, map[string]int{"assistant message that did not decode": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(strings.Join(tc.lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			if got := brief(p.Messages); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
			if len(p.Kinds) > 0 || len(tc.skipped) > 0 {
				if !reflect.DeepEqual(map[string]int(p.Kinds), tc.skipped) {
					t.Errorf("skipped %v, want %v", p.Kinds, tc.skipped)
				}
			}
		})
	}
}
