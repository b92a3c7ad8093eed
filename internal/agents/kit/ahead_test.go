package kit

import (
	"errors"
	"iter"
	"slices"
	"testing"
)

// TestAheadGivesBackEveryRecord: the records a writer pulls ahead for its
// header are written too, once and in order, and an error of recs reaches
// the writer wherever it falls.
func TestAheadGivesBackEveryRecord(t *testing.T) {
	bad := errors.New("messages did not read")
	seq := func(n int, failAt int) iter.Seq2[int, error] {
		return func(yield func(int, error) bool) {
			for i := range n {
				if i == failAt {
					yield(0, bad)
					return
				}
				if !yield(i, nil) {
					return
				}
			}
		}
	}
	for _, tc := range []struct {
		name          string
		n, failAt     int
		want          int // records enough waits for
		pulled, all   []int
		pullErr, eErr error
	}{
		{name: "one ahead", n: 4, failAt: -1, want: 1, pulled: []int{0}, all: []int{0, 1, 2, 3}},
		{name: "several ahead", n: 4, failAt: -1, want: 3, pulled: []int{0, 1, 2}, all: []int{0, 1, 2, 3}},
		{name: "fewer than wanted", n: 2, failAt: -1, want: 5, pulled: []int{0, 1}, all: []int{0, 1}},
		{name: "none", n: 0, failAt: -1, want: 1, all: nil},
		{name: "error while pulling", n: 4, failAt: 1, want: 3, pullErr: bad},
		{name: "error after", n: 4, failAt: 2, want: 1, pulled: []int{0}, all: []int{0, 1}, eErr: bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pulled, all, stop, err := Ahead(seq(tc.n, tc.failAt), func(p []int) bool { return len(p) >= tc.want })
			if !errors.Is(err, tc.pullErr) {
				t.Fatalf("Ahead error = %v, want %v", err, tc.pullErr)
			}
			if err != nil {
				return
			}
			defer stop()
			if !slices.Equal(pulled, tc.pulled) {
				t.Fatalf("pulled = %v, want %v", pulled, tc.pulled)
			}
			var got []int
			var gotErr error
			for r, err := range all {
				if err != nil {
					gotErr = err
					break
				}
				got = append(got, r)
			}
			if !slices.Equal(got, tc.all) || !errors.Is(gotErr, tc.eErr) {
				t.Fatalf("all = %v, %v; want %v, %v", got, gotErr, tc.all, tc.eErr)
			}
		})
	}
}
