// Package retry paces a loop that opens something again each time it ends
// (an etcd watch, a gRPC stream).
package retry

import "time"

// Budget paces re-opens and says when to give up. The budget is counted
// from the end of the last attempt that worked, not from the last that
// opened: something that opens fine and ends at once, again and again, is
// failing, and must not loop forever.
type Budget struct {
	Min, Max time.Duration // the pause doubles from Min to Max
	Limit    time.Duration // failing for longer than this gives up

	failingSince time.Time
	pause        time.Duration
}

// Ended records an attempt that ended at now; worked: it delivered
// something live or stayed up long enough to count as working. It returns
// the pause before the next attempt (none after one that worked), or false
// once the attempts have failed for longer than Limit.
func (b *Budget) Ended(now time.Time, worked bool) (time.Duration, bool) {
	if worked || b.failingSince.IsZero() {
		b.failingSince, b.pause = now, 0
		return 0, true
	}
	if now.Sub(b.failingSince) > b.Limit {
		return 0, false
	}
	b.pause = min(max(2*b.pause, b.Min), b.Max)
	return b.pause, true
}
