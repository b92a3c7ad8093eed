package agenttest

import (
	"context"
	"testing"
	"time"
)

// The slots bound how many runs hold one at once, across separate opens
// of the lock files as across processes (flock locks an open file, not a
// process), and a run that finds none free goes on without one.
func TestSlotsBoundRunsAtOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		n, held int
		want    bool
	}{
		{"no bound", 0, 3, false},
		{"one free", 2, 1, true},
		{"all held", 2, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for range tc.held {
				release, _, err := takeSlot(ctx, dir, tc.n, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(release)
			}
			release, got, err := takeSlot(ctx, dir, tc.n, 20*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if got != tc.want {
				t.Errorf("%d held of %d: got a slot %v, want %v", tc.held, tc.n, got, tc.want)
			}
		})
	}
}

// A run waiting for a slot takes the one another run gives back.
func TestSlotGivenBackIsTaken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	release, got, err := takeSlot(ctx, dir, 1, 0)
	if err != nil || !got {
		t.Fatalf("first slot: got %v, err %v", got, err)
	}
	busy := make(chan struct{}, 1)
	slotsAllHeld = func() {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { slotsAllHeld = func() {} })
	done := make(chan bool)
	go func() {
		r, got, err := takeSlot(ctx, dir, 1, time.Minute)
		if err != nil {
			t.Error(err)
		}
		r()
		done <- got
	}()
	<-busy // the other run is waiting: it found the one slot held
	release()
	if !<-done {
		t.Error("the waiting run did not get the slot given back")
	}
}

// A run with a deadline waits for a slot at most a quarter of its time,
// so the wait leaves the CLI most of it.
func TestSlotWaitLeavesTheCLIItsTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		left time.Duration // 0: no deadline
		max  time.Duration
	}{
		{"no deadline", 0, slotWait},
		{"a long deadline", time.Hour, slotWait},
		{"a short deadline", 40 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.left > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.left)
				defer cancel()
			}
			if got := slotWaitFor(ctx); got > tc.max || got < tc.max-time.Second {
				t.Errorf("waits %s for a slot, want about %s", got, tc.max)
			}
		})
	}
}
