package fanout

import (
	"context"
	"errors"
	"strconv"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/store"
)

// Watch calls fn with the session as it is, then (when startSeq > 0) every
// message from startSeq on, then each change as it happens, until ctx ends
// (nil) or fn fails, like store.Watch; but its live events come from the
// hub's one feed. principal's watches are capped at Config.MaxPerPrincipal:
// past it Watch fails before fn is called. Once Run has returned it ends
// with ErrStopped.
func (h *Hub) Watch(ctx context.Context, principal, sessionID string, startSeq int64, fn func(Event) error) error {
	s, err := h.join(principal, sessionID, false)
	if err != nil {
		return err
	}
	defer h.leave(principal, s)
	w := &watcher{h: h, s: s, fn: fn, next: startSeq}
	for {
		err := w.catchUp(ctx)
		if err == nil {
			err = w.follow(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case h.life.Err() != nil: // a read cut short by the stop, or dropped by it
			return ErrStopped
		case errors.Is(err, ErrFellBehind):
			h.lg.Debug("watcher fell behind; catching up from the store", zap.String("session", sessionID), zap.Int64("next_seq", w.next))
		default:
			return err
		}
	}
}

// watcher is one Watch: where it stands and where it sends.
type watcher struct {
	h  *Hub
	s  *sub
	fn func(Event) error
	// next is the seq of the next message to send (0: none asked for
	// yet, only what is appended from now on).
	next int64
	// rev is the revision of the last catch-up read: session records
	// queued from it or before are in it.
	rev int64
}

// catchUp rejoins the feed, then reads the session and its messages from
// next through its last seq.
func (w *watcher) catchUp(ctx context.Context) error {
	if err := w.h.rejoin(w.s); err != nil {
		return err
	}
	// After rejoining: the stop drops every watcher after it ends the
	// hub's life, so a watcher that rejoined first is dropped again.
	if w.h.life.Err() != nil {
		return ErrStopped
	}
	// The read, unlike the wait for live events, ends with the hub too:
	// a long catch-up must not hold the replica's stop.
	last, rev, err := replayAside(ctx, w.h.life, w.h.src, w.s.session, w.next, func(ev store.Event) error {
		// Live messages before next count as sent (take), so a watch from
		// past the end would skip the ones between without a word.
		if ev.Session != nil && w.next > ev.Session.LastSeq+1 {
			return errs.Invalid("start_seq %d is past the session's end (its last seq is %d); watch from at most %d, or from 0 for only new messages",
				w.next, ev.Session.LastSeq, ev.Session.LastSeq+1).With("last_seq", strconv.FormatInt(ev.Session.LastSeq, 10))
		}
		return w.send(Event{Event: ev})
	})
	if err != nil {
		return err
	}
	w.next, w.rev = max(w.next, last+1), rev
	return nil
}

// replayAside runs src.Replay on a goroutine of its own and calls fn on
// the caller's, one event at a time. A goroutine keeps the stack it grew
// to for as long as it lives, and a watch's lives as long as its stream:
// the store's read (clientv3 over gRPC) is deep enough to double it, to
// 16 KiB, half of what a stream held at 10,000 streams. The reader's
// stack goes when the read ends. A panic in the read is raised again on
// the caller's goroutine, where the call's recovery sees it, as before.
// The read ends when ctx or stop does.
func replayAside(ctx, stop context.Context, src Source, sessionID string, from int64, fn func(store.Event) error) (last, rev int64, err error) {
	// The read's context has ctx's values but is no child of it: ctx, an
	// idle stream's for hours, would keep the map and channel a child
	// adds long after the read. The loop below ends the read with ctx.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel() // also when fn panics: the reader stops waiting on it
	defer context.AfterFunc(stop, cancel)()
	evs, sent := make(chan store.Event), make(chan error)
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		last, rev, err = src.Replay(rctx, sessionID, from, func(ev store.Event) error {
			select {
			case evs <- ev:
			case <-rctx.Done():
				return rctx.Err()
			}
			select {
			case err := <-sent:
				return err
			case <-rctx.Done(): // fn panicked: the caller is gone
				return rctx.Err()
			}
		})
	}()
	gone := ctx.Done()
	for {
		select {
		case ev := <-evs:
			err := fn(ev)
			select {
			case sent <- err:
			case <-done:
			}
		case <-gone:
			cancel()
			gone = nil // the read ends: wait for done
		case <-done:
			if panicked != nil {
				panic(panicked)
			}
			return last, rev, err
		}
	}
}

// follow sends live events until the watcher falls behind, ctx ends or
// fn fails.
func (w *watcher) follow(ctx context.Context) error {
	for {
		it, err := w.s.next(ctx)
		if err != nil {
			return err
		}
		if err := w.take(it); err != nil {
			return err
		}
	}
}

// take sends one live event unless the catch-up read already had it.
func (w *watcher) take(it *item) error {
	switch {
	case it.msg != nil && it.msg.Seq < w.next:
		return nil // in the catch-up read
	case it.msg != nil && it.msg.Seq > w.next:
		// Seqs are dense: a gap means the feed lost something; the
		// store has it.
		w.h.lg.Warn("gap in the session feed; catching up from the store", zap.String("session", w.s.session),
			zap.Int64("want_seq", w.next), zap.Int64("got_seq", it.msg.Seq))
		return ErrFellBehind
	case it.msg != nil:
		return w.send(Event{Event: store.Event{Message: it.msg}, Memo: &it.memo})
	case it.sess != nil && it.rev > w.rev:
		return w.send(Event{Event: store.Event{Session: it.sess}, Memo: &it.memo})
	}
	return nil
}

// send hands ev to fn, moving next past a message.
func (w *watcher) send(ev Event) error {
	if err := w.fn(ev); err != nil {
		return err
	}
	if ev.Message != nil {
		w.next = ev.Message.Seq + 1
	}
	return nil
}
