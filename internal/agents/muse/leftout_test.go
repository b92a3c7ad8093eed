package muse

import (
	"reflect"
	"testing"
)

// What the session stream holds that the reader leaves out is counted by
// kind: run events of other versions, payloads of an unknown kind, a tool
// call or result without the id that pairs them. Usage, the run's end and
// task status carry no conversation and are not reported.
func TestDecodeCountsWhatItLeavesOut(t *testing.T) {
	in := rec("u1", "session", 1, `{"kind":"started","prompt":"MLO-U1 go"}`) +
		rec("t1", "session", 2, `{"kind":"assistant_tool_calls_committed","message_id":"b1","tool_calls":[{"name":"bash","args":"{}"},{"call_id":"c1","name":"bash","args":"{}"}]}`) +
		rec("r1", "session", 3, `{"kind":"tool_result_batch_committed","batch_id":"zz","results":[{"text":"orphan"},{"tool_call_id":"c1","text":"MLO-R1"}]}`) +
		rec("h1", "session", 4, `{"kind":"hologram_committed"}`) +
		rec("e1", "session", 5, `{"kind":"terminal"}`) +
		`{"schema_version":1,"id":"x1","stream":{"kind":"session","id":"S-session"},"sequence":6,"recorded_at":1786140000000000,"payload_type":"runtime.session","payload":{"kind":"dream"}}` + "\n"
	d, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Messages) != 3 {
		t.Errorf("%d messages, want the prompt, the call and its result", len(d.Messages))
	}
	want := map[string]int{"tool call without an id or name": 1, "tool result without a call id": 1, "hologram_committed event": 1, "dream record": 1}
	if !reflect.DeepEqual(map[string]int(d.Kinds), want) {
		t.Errorf("skipped %v, want %v", d.Kinds, want)
	}
}
