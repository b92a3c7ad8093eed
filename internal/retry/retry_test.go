package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errBlip, errHard = errors.New("blip"), errors.New("hard")

func TestDo(t *testing.T) {
	fast := Policy{Min: time.Millisecond, Max: 4 * time.Millisecond, Jitter: 0.5}
	for _, tc := range []struct {
		name      string
		p         Policy
		errs      []error // op's answers in turn; nil after them
		cancelAt  int     // cancel the context during this attempt (0: never)
		want      error
		wantCalls int
	}{
		{"succeeds after blips", fast, []error{errBlip, errBlip}, 0, nil, 3},
		{"Stop ends at once, unwrapped", fast, []error{errBlip, Stop(errHard)}, 0, errHard, 2},
		{"Stop on the last try is unwrapped too", Policy{Min: time.Millisecond, Tries: 2}, []error{errBlip, Stop(errHard)}, 0, errHard, 2},
		{"Tries bounds the attempts", Policy{Min: time.Millisecond, Tries: 3}, []error{errBlip, errBlip, errBlip, errBlip}, 0, errBlip, 3},
		{"Limit gives up rather than pause past it", Policy{Min: 40 * time.Millisecond, Limit: 50 * time.Millisecond}, []error{errBlip, errBlip, errBlip}, 0, errBlip, 2},
		{"a context that ends returns op's error, not ctx's", fast, []error{errBlip, errHard, errBlip, errBlip}, 2, errHard, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			err := Do(ctx, tc.p, func() error {
				calls++
				if calls == tc.cancelAt {
					cancel()
				}
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			}, nil)
			if err != tc.want || calls != tc.wantCalls {
				t.Fatalf("got %v after %d calls, want %v after %d", err, calls, tc.want, tc.wantCalls)
			}
		})
	}
}

// Get returns the last attempt's value, and notify hears each failure
// with the pause that follows it.
func TestGetNotifies(t *testing.T) {
	var heard []time.Duration
	n := 0
	v, err := Get(context.Background(), Policy{Min: time.Millisecond, Max: 2 * time.Millisecond}, func() (int, error) {
		if n++; n < 4 {
			return n, errBlip
		}
		return n, nil
	}, func(err error, d time.Duration) { heard = append(heard, d) })
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond}
	if v != 4 || err != nil || len(heard) != len(want) || heard[0] != want[0] || heard[1] != want[1] || heard[2] != want[2] {
		t.Fatalf("got %d, %v, pauses %v; want 4, nil, %v", v, err, heard, want)
	}
}

// Pauses double from Min to Max, each within ±Jitter but never past Max,
// and Reset starts them again.
func TestPauses(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: 800 * time.Millisecond, Jitter: 0.5}
	ps := p.Pauses()
	for round := range 2 {
		for i, base := range []time.Duration{100, 200, 400, 800, 800} {
			base *= time.Millisecond
			if d := ps.Next(); d < base/2 || d > min(base*3/2+1, p.Max) {
				t.Fatalf("round %d pause %d: %v, want within ±50%% of %v", round, i, d, base)
			}
		}
		ps.Reset()
	}
}

// A turn's rows are stored again at the node's reconnect pace, capped at
// their own 5 s below the default --reconnect-max.
func TestSyncFlushFollowsReconnect(t *testing.T) {
	for _, tc := range []struct {
		name             string
		first, longest   time.Duration
		wantMin, wantMax time.Duration
	}{
		{"the defaults", 200 * time.Millisecond, 10 * time.Second, 200 * time.Millisecond, 5 * time.Second},
		{"a shorter --reconnect-max", 200 * time.Millisecond, time.Second, 200 * time.Millisecond, time.Second},
		{"a shorter --reconnect-min", 10 * time.Millisecond, 50 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := SyncFlush(tc.first, tc.longest); p.Min != tc.wantMin || p.Max != tc.wantMax {
				t.Fatalf("SyncFlush(%v, %v) pauses %v to %v, want %v to %v", tc.first, tc.longest, p.Min, p.Max, tc.wantMin, tc.wantMax)
			}
		})
	}
}
