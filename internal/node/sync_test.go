package node

import (
	"fmt"
	"slices"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A row refused CLIENT_ID_REUSED leaves the pending batch; the rest stays,
// in order.
func TestDropClientID(t *testing.T) {
	rows := func(ids ...string) []*castv1.Message {
		var out []*castv1.Message
		for _, id := range ids {
			out = append(out, &castv1.Message{ClientId: id})
		}
		return out
	}
	for _, tc := range []struct {
		name, cid string
		in, want  []string
	}{
		{"middle", "b", []string{"a", "b", "c"}, []string{"a", "c"}},
		{"twice", "b", []string{"b", "a", "b"}, []string{"a"}},
		{"absent", "z", []string{"a", "b"}, []string{"a", "b"}},
		{"no id in the error", "", []string{"a", ""}, []string{"a", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range dropClientID(rows(tc.in...), tc.cid) {
				got = append(got, m.ClientId)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// What others stored while a turn ran (between the turn's own rows) is
// missing from the native session although its KnownUpto passes it.
func TestSyncerMissing(t *testing.T) {
	for _, tc := range []struct {
		name string
		ours []int64
		from int64
		want string
	}{
		{"nothing stored", nil, 4, "[]"},
		{"all ours", []int64{5, 6, 7}, 4, "[]"},
		{"a message sent meanwhile", []int64{5, 6, 8}, 4, "[7:7]"},
		{"runs merge", []int64{5, 9, 12}, 4, "[6:8 10:11]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &syncer{ours: map[int64]bool{}}
			for _, seq := range tc.ours {
				s.ours[seq], s.lastSeq = true, max(s.lastSeq, seq)
			}
			if got := fmt.Sprint(s.missing(tc.from)); got != tc.want {
				t.Fatalf("missing(%d) = %s, want %s", tc.from, got, tc.want)
			}
		})
	}
}
