package fanout

import (
	"sync"

	"github.com/cast-dev/cast/internal/store"
)

// Event is one event of a Watch. Memo is shared by every watcher the hub
// hands the same live event to (nil for what a catch-up read found), so
// work done for one watcher, such as encoding the event for the wire,
// is done once for all.
type Event struct {
	store.Event
	Memo *Memo
}

// Memo holds values made from one live event, by key. A nil Memo makes
// every value afresh.
type Memo struct{ m sync.Map }

// Get returns key's value, made by mk the first time (two watchers asking
// at once may both make it; one value is kept).
func (m *Memo) Get(key string, mk func() (any, error)) (any, error) {
	if m != nil {
		if v, ok := m.m.Load(key); ok {
			return v, nil
		}
	}
	v, err := mk()
	if err != nil || m == nil {
		return v, err
	}
	v, _ = m.m.LoadOrStore(key, v)
	return v, nil
}
