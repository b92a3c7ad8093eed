package opencode

import (
	"reflect"
	"strings"
	"testing"
)

// What an export holds that the reader leaves out is counted by kind: an
// image a tool returned with its output, a part or message of a shape the
// reader does not expect (its neighbours are kept, not the whole document
// lost).
func TestParseExportCountsWhatItLeavesOut(t *testing.T) {
	export := `{"info":{"id":"ses_lo","directory":"/w"},"messages":[
 {"info":{"id":"msg_01","role":"user","time":{"created":1000}},"parts":[
  {"id":"prt_01","type":"text","text":"OLO-U1 read the screenshot"},
  {"id":"prt_02","type":"text","text":"OLO-ODD","time":{"start":"yesterday"}}]},
 {"info":{"id":"msg_02","role":"assistant","modelID":"m1","time":{"created":1100}},"parts":[
  {"id":"prt_03","type":"tool","callID":"call_1","tool":"read","state":{"status":"completed","input":{"filePath":"/w/a.png"},"output":"OLO-R1 image read","metadata":{},"time":{"start":1150,"end":1160},
   "attachments":[{"id":"prt_04","type":"file","mime":"image/png","url":"data:image/png;base64,iVBOR"}]}},
  {"id":"prt_05","type":"text","text":"OLO-A1 a red square","time":{"start":1200,"end":1201}}]},
 {"info":"not a message","parts":[]}
]}`
	p, err := Parse(strings.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"user OLO-U1 read the screenshot",
		`tool_call call_1 read {"filePath":"/w/a.png"}`,
		"tool_result call_1 exit=- err=false OLO-R1 image read",
		"assistant OLO-A1 a red square",
	}
	if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("\n got: %q\nwant: %q", got, want)
	}
	wantKinds := map[string]int{"image attachment of a tool result": 1, "part that did not decode": 1, "message that did not decode": 1}
	if !reflect.DeepEqual(map[string]int(p.Kinds), wantKinds) {
		t.Errorf("skipped %v, want %v", p.Kinds, wantKinds)
	}
}

// Session rows the reader leaves out are counted by kind too: tables and
// message types it does not know, a tool item without an id, a row that
// does not decode, non-text content of a tool's output. Idle and
// model-switched rows carry no conversation and are not reported.
func TestParseRowsCountsWhatItLeavesOut(t *testing.T) {
	rows := strings.Join([]string{
		`{"table":"session_v2","row":{"id":"ses_r","directory":"/w"}}`,
		`{"table":"session_message","row":{"id":"m1","seq":1,"type":"user","time_created":1000,"data":{"text":"ORO-U1 go"}}}`,
		`{"table":"session_message","row":{"id":"m2","seq":2,"type":"assistant","time_created":1100,"data":{"model":{"id":"m"},"content":[` +
			`{"type":"text","text":"ORO-A1 ok"},{"type":"tool","name":"read"},{"type":"hologram"},` +
			`{"type":"tool","id":"t1","name":"read","state":{"status":"completed","content":[{"type":"text","text":"ORO-R1"},{"type":"image","text":""}]}}]}}}`,
		`{"table":"session_message","row":{"id":"m3","seq":3,"type":"idle","time_created":1200,"data":{}}}`,
		`{"table":"session_message","row":{"id":"m4","seq":4,"type":"time-travelled","time_created":1300,"data":{}}}`,
		`{"table":"session_message","row":{"id":"m5","seq":"five","type":"user"}}`,
		`{"table":"workspace","row":{"id":"w1"}}`,
	}, "\n")
	p, err := Parse(strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user ORO-U1 go", "assistant ORO-A1 ok", "tool_call t1 read {}", "tool_result t1 exit=- err=false ORO-R1"}
	if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("\n got: %q\nwant: %q", got, want)
	}
	wantKinds := map[string]int{"tool content without an id or name": 1, "hologram content": 1, "image content of a tool result": 1,
		"time-travelled message row": 1, "session_message row that did not decode": 1, "workspace row": 1}
	if !reflect.DeepEqual(map[string]int(p.Kinds), wantKinds) {
		t.Errorf("skipped %v, want %v", p.Kinds, wantKinds)
	}
}

// What does not decode is counted by what it was: a session row, a
// message's parts that are no list (its neighbours kept).
func TestParseCountsDecodingFailuresByKind(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
		skipped   map[string]int
	}{
		{"a session row", strings.Join([]string{
			`{"table":"session_v2","row":{"id":5}}`,
			`{"table":"session_message","row":{"id":"m1","seq":1,"type":"user","time_created":1000,"data":{"text":"ODF-U1 go"}}}`,
		}, "\n"), []string{"user ODF-U1 go"}, map[string]int{"session_v2 row that did not decode": 1}},
		{"parts that are no list", `{"info":{"id":"ses_df","directory":"/w"},"messages":[
 {"info":{"id":"msg_01","role":"user","time":{"created":1000}},"parts":[{"id":"prt_01","type":"text","text":"ODF-U1 go"}]},
 {"info":{"id":"msg_02","role":"assistant","time":{"created":1100}},"parts":{"id":"prt_02","type":"text","text":"lost"}}]}`,
			[]string{"user ODF-U1 go"}, map[string]int{"part that did not decode": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
			if !reflect.DeepEqual(map[string]int(p.Kinds), tc.skipped) {
				t.Errorf("skipped %v, want %v", p.Kinds, tc.skipped)
			}
		})
	}
}
