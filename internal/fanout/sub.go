package fanout

import (
	"context"
	"sync"
)

// sub is one watcher of a session. Its queue is a slice rather than a
// channel of Buffer slots: an idle watcher (most of them) then holds no
// slots at all, which at thousands of watchers is most of its memory.
type sub struct {
	session string
	perms   bool // a permission waiter: gets perm items only

	mu sync.Mutex
	q  []*item // live events not taken yet, at most Config.Buffer
	// lost: the feed dropped the watcher (its queue was full, or a new
	// feed started); it gets nothing until it rejoins.
	lost bool
	wake chan struct{} // 1 slot: q grew or lost was set
}

// offer queues it unless s is lost; a full queue loses s. It reports
// whether s was lost by it.
func (s *sub) offer(it *item, limit int) bool {
	s.mu.Lock()
	lostNow := false
	switch {
	case s.lost:
	case len(s.q) >= limit:
		s.lost, s.q, lostNow = true, nil, true
	default:
		s.q = append(s.q, it)
	}
	s.mu.Unlock()
	s.signal()
	return lostNow
}

// drop loses s; it reports whether s was not lost already.
func (s *sub) drop() bool {
	s.mu.Lock()
	lostNow := !s.lost
	s.lost, s.q = true, nil
	s.mu.Unlock()
	s.signal()
	return lostNow
}

func (s *sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// rejoin empties the queue and takes events again.
func (s *sub) rejoin() {
	s.mu.Lock()
	s.lost, s.q = false, nil
	s.mu.Unlock()
}

// next is s's next live event; ErrFellBehind once the feed dropped it.
func (s *sub) next(ctx context.Context) (*item, error) {
	for {
		s.mu.Lock()
		if len(s.q) > 0 {
			it := s.q[0]
			s.q[0], s.q = nil, s.q[1:]
			if len(s.q) == 0 {
				s.q = nil // an idle watcher keeps no slots
			}
			s.mu.Unlock()
			return it, nil
		}
		lost := s.lost
		s.mu.Unlock()
		if lost {
			return nil, ErrFellBehind
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.wake:
		}
	}
}
