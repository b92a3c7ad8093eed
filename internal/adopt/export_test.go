package adopt

import "time"

// SetClock makes f read the time from now: a test moves it past the bound
// on an unchanged store's staleness.
func SetClock(f *Follower, now func() time.Time) { f.now = now }
