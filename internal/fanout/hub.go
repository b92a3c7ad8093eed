// Package fanout gives every session watcher of a control plane replica
// (WatchSession streams, RequestPermission waits) its events from one
// etcd watch per replica (store.Feed), instead of etcd watches of its own.
//
// Each watcher has a bounded buffer of live events. The feed never waits
// for a watcher: one whose buffer is full stops getting events and is told
// it fell behind (ErrFellBehind); it catches up by reading the store from
// its next seq and rejoins the live feed. It joins (an empty buffer that
// events start to reach) before it reads, so the read covers everything
// the feed did not hand it, and it skips by seq what it gets twice: no gap
// and no duplicate. When the feed's history is compacted, the hub starts
// a new one from the current revision and every watcher catches up the
// same way; when etcd refuses the feed, every watcher ends with that error,
// and new ones fail with it, until a new feed runs. A message the feed
// cannot read sends its session's watchers to catch up the same way.
package fanout

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/tick"
)

// Source is the store as the hub uses it (*store.Store).
type Source interface {
	Revision(ctx context.Context) (int64, error)
	Feed(ctx context.Context, rev int64, want func(sessionID string) bool, fn func(store.FeedBatch)) error
	Replay(ctx context.Context, sessionID string, from int64, fn func(store.Event) error) (last, rev int64, err error)
	GetSession(ctx context.Context, id string) (*castv1.Session, error)
	GetPermission(ctx context.Context, sessionID, rid string) (store.Permission, error)
}

// ReasonFellBehind is ErrFellBehind's reason.
const ReasonFellBehind = "WATCH_FELL_BEHIND"

// ErrFellBehind: a watcher's buffer filled, or the feed could not read a
// message of its session, so the feed dropped it; it catches up from the
// store.
var ErrFellBehind = errs.New(errs.KindUnavailable, ReasonFellBehind, "the watch fell behind the live feed; catching up from the store")

// ErrStopped ends every Watch once Run has returned: no feed will reach
// it again. The watcher watches again (elsewhere) from its next seq.
var ErrStopped = errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "the control plane replica is stopping; watch again from the next seq")

// Hub fans one replica's session feed out to its watchers.
type Hub struct {
	src Source
	cfg Config
	lg  *zap.Logger

	mu   sync.RWMutex
	subs map[string]map[*sub]struct{} // by session
	open map[string]int               // session watches by principal

	// broken is why the feed failed, while it is down for a reason a
	// new feed from a fresh revision does not cure (etcd refusing the
	// range, an outage): watchers end with it rather than wait.
	broken atomic.Pointer[error]

	// life ends when Run returns, and with it every Watch (ErrStopped):
	// the hub ends its watches itself rather than each holding a context
	// of its own that the replica's stop cancels (at 10,000 streams, a
	// context, its channel and an entry in the stop's map each).
	life context.Context
	end  context.CancelFunc

	fellBehind atomic.Int64 // times a watcher was dropped from the feed
	restarts   atomic.Int64 // feeds started (the first included)
}

// New returns a Hub over src; Run feeds it, once: when Run returns the
// hub's watches end for good.
func New(src Source, cfg Config, lg *zap.Logger) *Hub {
	h := &Hub{src: src, cfg: cfg, lg: lg.Named("fanout"), subs: map[string]map[*sub]struct{}{}, open: map[string]int{}}
	h.life, h.end = context.WithCancel(context.Background())
	return h
}

// Stats are a hub's counters.
type Stats struct {
	Watchers   int   // open now
	FellBehind int64 // times since New a watcher was dropped from the feed (a full buffer, a new feed, or a message the feed could not read) to catch up
	Feeds      int64 // feeds started since New: 1 + restarts
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.RLock()
	n := 0
	for _, ss := range h.subs {
		n += len(ss)
	}
	h.mu.RUnlock()
	return Stats{Watchers: n, FellBehind: h.fellBehind.Load(), Feeds: h.restarts.Load()}
}

// item is one live event, shared by every watcher it is queued for (never
// changed once queued).
type item struct {
	rev  int64
	msg  *castv1.Message
	sess *castv1.Session
	perm *store.Permission
	memo Memo
}

// Run keeps a feed going until ctx ends: it reads the current revision,
// sends every watcher joined so far to catch up (their reads come after
// that revision), and follows the feed from the next one; when the feed
// breaks it starts again. A feed compacted (or canceled) under it is
// replaced quietly; any other failure also ends every watcher with the
// failure, and new ones fail with it until a new feed starts. When it
// returns, every Watch ends with ErrStopped, and new ones at once.
func (h *Hub) Run(ctx context.Context) {
	defer h.stop()
	pauses := retry.EtcdWatch.Pauses()
	for ctx.Err() == nil {
		started := time.Now()
		err := h.runFeed(ctx)
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, store.ErrFeedCompacted) && !errors.Is(err, context.Canceled) {
			h.broken.Store(&err)
			h.dropAll()
		}
		if time.Since(started) > time.Minute {
			pauses.Reset()
		}
		pause := pauses.Next()
		h.lg.Warn("session feed ended; starting a new one, every watcher catches up from the store",
			zap.Error(err), zap.Duration("after", pause))
		tick.Sleep(ctx, pause)
	}
}

func (h *Hub) runFeed(ctx context.Context) error {
	rev, err := h.src.Revision(ctx)
	if err != nil {
		return err
	}
	h.broken.Store(nil)
	h.dropAll()
	h.restarts.Add(1)
	return h.src.Feed(ctx, rev+1, h.watched, func(b store.FeedBatch) { h.dispatch(ctx, b) })
}

// watched says whether session has watchers. One that joins after it
// said no reads the store after, which covers the event it declined.
func (h *Hub) watched(session string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[session]) > 0
}

// dropAll tells every watcher to catch up: what the previous feed would
// have handed them is lost.
func (h *Hub) dropAll() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, ss := range h.subs {
		for s := range ss {
			h.drop(s)
		}
	}
}

// stop ends the hub's life, then drops every session watcher: one that
// rejoins after sees the end (Watch checks after rejoining).
// Permission waiters are left to their callers' contexts.
func (h *Hub) stop() {
	h.end()
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, ss := range h.subs {
		for s := range ss {
			if !s.perms {
				s.drop()
			}
		}
	}
}

// drop tells s to catch up, counted.
func (h *Hub) drop(s *sub) {
	if s.drop() {
		h.fellBehind.Add(1)
	}
}

// offer queues it for s; a full queue drops s.
func (h *Hub) offer(s *sub, it *item) {
	if s.offer(it, h.cfg.Buffer) {
		h.fellBehind.Add(1)
	}
}

// dispatch hands one batch to the watchers of its sessions: messages and
// permission changes as they come, then each changed session record, read
// once for all its watchers (a record is assembled from several keys).
func (h *Hub) dispatch(ctx context.Context, b store.FeedBatch) {
	records := map[string]bool{}
	h.mu.RLock()
	for _, c := range b.Changes {
		ss := h.subs[c.Session]
		if len(ss) == 0 {
			continue
		}
		if c.Record {
			records[c.Session] = true
			continue
		}
		if c.Lost {
			// A message the feed could not read: the watchers read it from
			// the store, as when they fall behind, rather than wait for
			// the session's next message to show the gap. (A permission
			// waiter, dropped too, reads its request again.)
			for s := range ss {
				h.drop(s)
			}
			continue
		}
		it := &item{rev: b.Rev, msg: c.Message, perm: c.Perm}
		for s := range ss {
			if s.perms == (it.perm != nil) {
				h.offer(s, it)
			}
		}
	}
	h.mu.RUnlock()
	if len(records) > 0 {
		h.dispatchRecords(ctx, b.Rev, records)
	}
}

// dispatchRecords reads the changed sessions (at once) and queues them;
// the watchers of one whose read failed catch up instead.
func (h *Hub) dispatchRecords(ctx context.Context, rev int64, ids map[string]bool) {
	type read struct {
		id   string
		sess *castv1.Session
	}
	out := make(chan read, len(ids))
	for id := range ids {
		go func() {
			sess, err := h.src.GetSession(ctx, id)
			if err != nil && ctx.Err() == nil {
				h.lg.Debug("read changed session failed; its watchers catch up", zap.String("session", id), zap.Error(err))
			}
			out <- read{id, sess}
		}()
	}
	for range ids {
		r := <-out
		h.mu.RLock()
		it := &item{rev: rev, sess: r.sess}
		for s := range h.subs[r.id] {
			switch {
			case s.perms:
			case r.sess == nil:
				h.drop(s)
			default:
				h.offer(s, it)
			}
		}
		h.mu.RUnlock()
	}
}

// join registers a watcher of session; principal "" is not counted
// against a cap (permission waits).
func (h *Hub) join(principal, session string, perms bool) (*sub, error) {
	s := &sub{session: session, perms: perms, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if principal != "" {
		if n := h.open[principal]; n >= h.cfg.MaxPerPrincipal {
			return nil, errs.New(errs.KindResourceExhausted, authz.ReasonTooManyStreams,
				"%s has %d session watches open on this control plane replica, the most allowed (--max-watches); close one first", principal, n).
				With("limit", strconv.Itoa(h.cfg.MaxPerPrincipal))
		}
		h.open[principal]++
	}
	if h.subs[session] == nil {
		h.subs[session] = map[*sub]struct{}{}
	}
	h.subs[session][s] = struct{}{}
	return s, nil
}

// leave unregisters s.
func (h *Hub) leave(principal string, s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[s.session], s)
	if len(h.subs[s.session]) == 0 {
		delete(h.subs, s.session)
	}
	if principal != "" {
		if h.open[principal]--; h.open[principal] <= 0 {
			delete(h.open, principal)
		}
	}
}

// rejoin empties s's queue and lets the feed queue for it again. The
// caller reads the store after: whatever the feed offers from here on is
// in that read or in the queue. It fails while the feed is broken.
func (h *Hub) rejoin(s *sub) error {
	if err := h.broken.Load(); err != nil {
		return *err
	}
	s.rejoin()
	return nil
}

var _ Source = (*store.Store)(nil)
