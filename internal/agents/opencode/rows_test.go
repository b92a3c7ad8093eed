package opencode

import (
	"strings"
	"testing"
)

// OpenCode writes an assistant row again at every delta of its text, and
// sets data.time.completed when the model's step ends. A row dump taken
// mid-turn holds the last row's text cut short, and `cast import` kept it
// as the answer. The text (or reasoning) still streaming, the last item of
// the last row while that row is not completed, is left out; what the
// row finished before it, and a completed row's text, are kept.
func TestRowsLeaveOutTheTextStillStreaming(t *testing.T) {
	const head = `{"table":"session_v2","row":{"id":"ses_s","directory":"/w"}}
{"table":"session_message","row":{"id":"m1","seq":1,"type":"user","time_created":1000,"data":{"text":"go"}}}
`
	assistant := func(id, seq, time, content string) string {
		return `{"table":"session_message","row":{"id":"` + id + `","seq":` + seq + `,"type":"assistant","time_created":1100,"data":{"model":{"id":"m"},` +
			`"time":` + time + `,"content":[` + content + `]}}}` + "\n"
	}
	tool := `{"type":"tool","id":"t1","name":"read","state":{"status":"completed","content":[{"type":"text","text":"R"}]}}`
	tests := []struct {
		name, rows string
		want       []string
	}{
		{"streaming text left out", head + assistant("m2", "2", `{"created":1100}`, `{"type":"text","text":"A1 before"},`+tool+`,{"type":"text","text":"A2 half"}`),
			[]string{"user go", "assistant A1 before", "tool_call t1 read {}", "tool_result t1 exit=- err=false R"}},
		{"streaming reasoning left out", head + assistant("m2", "2", `{"created":1100}`, `{"type":"reasoning","text":"thinking hal","time":{"created":1100}}`),
			[]string{"user go"}},
		{"a finished reasoning kept", head + assistant("m2", "2", `{"created":1100}`, `{"type":"reasoning","text":"thought","time":{"created":1100,"completed":1150}}`),
			[]string{"user go", "thinking thought"}},
		{"completed row kept whole", head + assistant("m2", "2", `{"created":1100,"completed":1200}`, `{"type":"text","text":"A1 done"}`),
			[]string{"user go", "assistant A1 done"}},
		{"an earlier row is not streaming", head + assistant("m2", "2", `{"created":1100}`, `{"type":"text","text":"A1 earlier"}`) +
			`{"table":"session_message","row":{"id":"m3","seq":3,"type":"user","time_created":1300,"data":{"text":"next"}}}` + "\n",
			[]string{"user go", "assistant A1 earlier", "user next"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.rows))
			if err != nil {
				t.Fatal(err)
			}
			if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}
