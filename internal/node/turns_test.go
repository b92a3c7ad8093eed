package node

import (
	"slices"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

// A rebuilt native session leaves out the user messages an undelivered
// notice names, and nothing else.
func TestWithoutUndelivered(t *testing.T) {
	u := func(seq int64) transcript.Message {
		return transcript.Message{Seq: seq, Kind: transcript.KindUser, Text: "u"}
	}
	a := func(seq int64) transcript.Message {
		return transcript.Message{Seq: seq, Kind: transcript.KindAssistant, Text: "a"}
	}
	n := func(seq int64, cid string) transcript.Message {
		return transcript.Message{Seq: seq, Kind: transcript.KindNotice, NoticeType: transcript.NoticeUndelivered, ClientID: cid, Text: "not delivered"}
	}
	for _, tc := range []struct {
		name string
		in   []transcript.Message
		want []int64
	}{
		{"none", []transcript.Message{u(1), a(2)}, []int64{1, 2}},
		{"one refused", []transcript.Message{u(1), a(2), u(3), n(4, "undelivered.3-3"), u(5), a(6)}, []int64{1, 2, 4, 5, 6}},
		{"a range, answers kept", []transcript.Message{u(1), a(2), u(3), u(4), a(5), n(6, "undelivered.3-5")}, []int64{1, 2, 5, 6}},
		{"malformed id", []transcript.Message{u(1), n(2, "undelivered.x")}, []int64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int64
			for _, m := range withoutUndelivered(tc.in) {
				got = append(got, m.Seq)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got seqs %v, want %v", got, tc.want)
			}
		})
	}
}
