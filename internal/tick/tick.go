// Package tick is the ticker loop behind cast's periodic jobs (sweeps,
// polls, heartbeats, reloads): a function called every interval, and at
// once when something asks, until a context or a stop channel ends it;
// and the pause that a context cuts short (Sleep). A loop whose wait
// also ends on events of its own (the runner's, on its CLI's exit and
// its kill timer; the store's handover wait, on an etcd watch; a node
// worker's back-off, on a wake) selects on its own timer instead.
package tick

import (
	"context"
	"time"
)

// Every calls fn every d until ctx ends or fn returns false.
func Every(ctx context.Context, d time.Duration, fn func() bool) {
	Loop{Every: d}.Run(ctx, fn)
}

// Loop says when Run calls its function. The zero Wake and Stop (nil)
// never fire.
type Loop struct {
	Every time.Duration   // between calls
	First bool            // call once at the start, before the first wait
	Wake  <-chan struct{} // a value (or a close) calls at once
	Stop  <-chan struct{} // a value (or a close) ends the loop as ctx does
}

// Run calls fn as l says until ctx ends, Stop fires or fn returns false.
// The ticker starts before the first call, so a call that takes longer
// than Every is followed at once by the next.
func (l Loop) Run(ctx context.Context, fn func() bool) {
	t := time.NewTicker(l.Every)
	defer t.Stop()
	if l.First && !fn() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.Stop:
			return
		case <-t.C:
		case <-l.Wake:
		}
		if !fn() {
			return
		}
	}
}

// Sleep waits d; false when ctx ended first. It is the pause between two
// tries of a loop that is not periodic (a watch restarted, a report
// retried, a stream redialled).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
