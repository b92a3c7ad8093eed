package codex

import (
	"strings"
	"testing"
)

// A trailing message and its copy wait for the next record of another
// kind; whatever precedes them is read.
func TestSettled(t *testing.T) {
	meta := `{"type":"session_meta","payload":{"id":"x"}}` + "\n"
	user := `{"type":"response_item","payload":{"type":"message","role":"user","content":[]}}` + "\n"
	copyOf := `{"type":"event_msg","payload":{"type":"user_message","message":"hi"}}` + "\n"
	answer := `{"type":"response_item","payload":{"type":"message","role":"assistant","content":[]}}` + "\n"
	tokens := `{"type":"event_msg","payload":{"type":"token_count"}}` + "\n"
	cases := []struct {
		name string
		b    string
		want int
	}{
		{"nothing", "", 0},
		{"a message last waits", meta + user, len(meta)},
		{"a pair last waits whole", meta + user + copyOf, len(meta)},
		{"copy first, then its item: waits whole", meta + copyOf + user, len(meta)},
		{"a message then another record: all read", meta + user + copyOf + answer + tokens, len(meta + user + copyOf + answer + tokens)},
		{"only messages: nothing yet", user + copyOf, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Driver{}).Settled([]byte(tc.b)); got != tc.want {
				t.Fatalf("Settled = %d (%q), want %d", got, tc.b[:got], tc.want)
			}
			if !strings.HasSuffix(tc.b[:tc.want], "\n") && tc.want > 0 {
				t.Fatalf("cut inside a line")
			}
		})
	}
}
