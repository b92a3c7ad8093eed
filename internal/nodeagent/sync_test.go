package nodeagent

import (
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
