package tick

import (
	"context"
	"testing"
	"time"
)

func TestLoop(t *testing.T) {
	t.Parallel()
	const never = time.Hour // a ticker that does not fire within the test
	for _, tc := range []struct {
		name     string
		loop     Loop
		done     bool // ctx ended before Run
		stopped  bool // Stop closed before Run
		wakes    int  // values waiting on Wake
		stopAt   int  // fn returns false on this call (0: never)
		want     int  // calls
		useEvery bool // through Every, not Loop.Run
	}{
		{name: "Every ticks until fn says stop", loop: Loop{Every: time.Millisecond}, stopAt: 3, want: 3, useEvery: true},
		{name: "Run ticks until fn says stop", loop: Loop{Every: time.Millisecond}, stopAt: 3, want: 3},
		{name: "an ended ctx ends it before any call", loop: Loop{Every: never}, done: true, want: 0},
		{name: "First calls once even when ctx has ended", loop: Loop{Every: never, First: true}, done: true, want: 1},
		{name: "First's call saying stop ends it", loop: Loop{Every: never, First: true}, wakes: 2, stopAt: 1, want: 1},
		{name: "each wake calls at once", loop: Loop{Every: never}, wakes: 3, stopAt: 3, want: 3},
		{name: "a closed Stop ends it before any call", loop: Loop{Every: never}, stopped: true, want: 0},
		{name: "a closed Stop ends it after First's call", loop: Loop{Every: never, First: true}, stopped: true, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.done {
				cancel()
			}
			wake := make(chan struct{}, tc.wakes)
			for range tc.wakes {
				wake <- struct{}{}
			}
			stop := make(chan struct{})
			if tc.stopped {
				close(stop)
			}
			l := tc.loop
			l.Wake, l.Stop = wake, stop
			calls := 0
			fn := func() bool {
				calls++
				return calls != tc.stopAt
			}
			if tc.useEvery {
				Every(ctx, l.Every, fn)
			} else {
				l.Run(ctx, fn)
			}
			if calls != tc.want {
				t.Errorf("fn called %d times, want %d", calls, tc.want)
			}
		})
	}
}

// Sleep waits its time unless the context ends first, and says which.
func TestSleep(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"the time passes", context.Background(), time.Millisecond, true},
		{"the context ends first", ended, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sleep(tc.ctx, tc.d); got != tc.want {
				t.Fatalf("Sleep = %v, want %v", got, tc.want)
			}
		})
	}
}
