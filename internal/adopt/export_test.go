package adopt

import (
	"time"

	"github.com/cast-dev/cast/internal/agents"
)

// SetClock makes f read the time from now: a test moves it past the bound
// on an unchanged store's staleness.
func SetClock(f *Follower, now func() time.Time) { f.now = now }

// WrapStoreLister makes f list each store agent's sessions through wrap of
// its driver: a test counts the listings, or fails one.
func WrapStoreLister(f *Follower, wrap func(agents.StoreLister) agents.StoreLister) {
	f.lister = func(agent string) (agents.StoreLister, bool) {
		sl, ok := storeLister(agent)
		if !ok {
			return nil, false
		}
		return wrap(sl), true
	}
}
