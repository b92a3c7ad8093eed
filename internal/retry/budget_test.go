package retry

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at     time.Duration // since t0
		worked bool
		pause  time.Duration
		ok     bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"an attempt that ends at once, again and again, gives up after the limit", []step{
			{0, false, 0, true}, {time.Second, false, 100 * time.Millisecond, true},
			{2 * time.Second, false, 200 * time.Millisecond, true}, {3 * time.Second, false, 400 * time.Millisecond, true},
			{4 * time.Second, false, 400 * time.Millisecond, true}, {10 * time.Second, false, 400 * time.Millisecond, true},
			{10*time.Second + 1, false, 0, false},
		}},
		{"one that worked starts the budget and the pauses again", []step{
			{0, false, 0, true}, {time.Second, false, 100 * time.Millisecond, true},
			{9 * time.Second, true, 0, true}, {10 * time.Second, false, 100 * time.Millisecond, true},
			{19 * time.Second, false, 200 * time.Millisecond, true}, {19*time.Second + 1, false, 0, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Budget{Policy: Policy{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond, Limit: 10 * time.Second}}
			for i, s := range tc.steps {
				pause, ok := b.Ended(t0.Add(s.at), s.worked)
				if pause != s.pause || ok != s.ok {
					t.Fatalf("step %d (%v, worked %v): (%v, %v), want (%v, %v)", i, s.at, s.worked, pause, ok, s.pause, s.ok)
				}
			}
		})
	}
}
