package retry

import "time"

// Budget paces re-opens of something that keeps ending (an etcd watch, a
// gRPC stream) and says when to give up: Policy's pauses, and its Limit
// counted from the end of the last attempt that worked, not from the last
// that opened: something that opens fine and ends at once, again and
// again, is failing, and must not loop forever. Tries is not used.
type Budget struct {
	Policy

	failingSince time.Time
	pauses       *Pauses
}

// Ended records an attempt that ended at now; worked: it delivered
// something live or stayed up long enough to count as working. It returns
// the pause before the next attempt (none after one that worked), or false
// once the attempts have failed for longer than Limit.
func (b *Budget) Ended(now time.Time, worked bool) (time.Duration, bool) {
	if worked || b.failingSince.IsZero() {
		b.failingSince, b.pauses = now, b.Pauses()
		return 0, true
	}
	if now.Sub(b.failingSince) > b.Limit {
		return 0, false
	}
	return b.pauses.Next(), true
}
