package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// FeedChange is one change to a session that a session's watchers see:
// exactly one of Message, Record, Perm and Lost is set.
type FeedChange struct {
	Session string
	Message *castv1.Message // appended
	Record  bool            // the session record or its owner changed, or the record was deleted (GetSession has it, or NOT_FOUND)
	Perm    *Permission     // a permission request was asked or answered
	// Lost: a message was appended that the feed could not read (a large
	// message's chunks, say); the store has it. Its watchers read it from
	// there: seqs would show them the gap only at the session's next
	// message, which may never come.
	Lost bool
}

// FeedBatch is the changes of one etcd watch response, in revision order;
// Rev is the revision of the last.
type FeedBatch struct {
	Rev     int64
	Changes []FeedChange
}

// Revision is etcd's current revision (a linearizable read).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.key("health"), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// ErrFeedCompacted: Feed's history from where it stood was compacted; a
// new Feed from a fresh revision works (its watchers read what they
// missed from the store).
var ErrFeedCompacted = errors.New("the session feed fell behind the store's history")

// Feed calls fn with every change to every session's messages, record,
// owner and permission requests from revision rev on, in revision order,
// until ctx ends (ctx's error) or the watch cannot go on: ErrFeedCompacted,
// or an UNAVAILABLE error saying why (etcd refused the range, or kept
// canceling the watch for its budget). It is one etcd watch, over the key
// range msgs/ .. sessions/ that holds all four, so one replica's session
// watchers share it. Changes of sessions want declines are left out
// undecoded (a large message's chunks are not read for nobody).
func (s *Store) Feed(ctx context.Context, rev int64, want func(sessionID string) bool, fn func(FeedBatch)) error {
	from, to := s.key("msgs")+"/", s.key("sessions")+"0" // "0" sorts right after "/"
	// Deletions too: a purge writes nothing, and its watchers learn of it
	// only from the record's deletion (feedChange keeps just that one).
	err := s.followRange(ctx, from, to, rev, true, func(events []*clientv3.Event) {
		out := FeedBatch{Rev: events[len(events)-1].Kv.ModRevision}
		for _, ev := range events {
			if c, ok := s.feedChange(ctx, ev, want); ok {
				out.Changes = append(out.Changes, c)
			}
		}
		fn(out)
	})
	switch {
	case ctx.Err() != nil || err == nil:
		return err
	case errors.Is(err, rpctypes.ErrCompacted):
		return ErrFeedCompacted
	}
	return watchEnded(err)
}

// followRange calls fn with each batch of puts (and with deletes, of
// deletions) to keys in [from, to) from revision rev on, until ctx ends
// (nil) or follow gives up (why).
func (s *Store) followRange(ctx context.Context, from, to string, rev int64, deletes bool, fn func([]*clientv3.Event)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRange(to)}
	if !deletes {
		opts = append(opts, clientv3.WithFilterDelete())
	}
	for b := range s.follow(wctx, from, rev, opts...) {
		if b.Err != nil {
			return b.Err
		}
		if len(b.Events) > 0 {
			fn(b.Events)
		}
	}
	return ctx.Err()
}

// feedChange decodes one event of Feed's range; false for keys of the
// range nobody watches (seqs, node records, ...), for sessions want
// declines, and for deletions but a session record's (a purge: GetSession
// then finds no session). A message it cannot read is Lost.
func (s *Store) feedChange(ctx context.Context, ev *clientv3.Event, want func(string) bool) (FeedChange, bool) {
	key := string(ev.Kv.Key)
	top, rest, _ := strings.Cut(key[len(s.cfg.Prefix):], "/")
	sid, rest, _ := strings.Cut(rest, "/")
	if ev.Type == clientv3.EventTypeDelete {
		gone := top == "sessions" && rest == "" && want(sid)
		return FeedChange{Session: sid, Record: gone}, gone
	}
	switch top {
	case "msgs", "sessions", "owners", "perms":
		if !want(sid) {
			return FeedChange{}, false
		}
	}
	switch top {
	case "msgs":
		m, err := s.decodeKV(ctx, sid, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
		if err != nil {
			s.lg.Warn("undecodable message in the session feed; its session's watchers catch up from the store", zap.String("key", key), zap.Error(err))
			return FeedChange{Session: sid, Lost: true}, true
		}
		return FeedChange{Session: sid, Message: m}, true
	case "sessions", "owners":
		return FeedChange{Session: sid, Record: rest == ""}, rest == ""
	case "perms":
		var p Permission
		if err := json.Unmarshal(ev.Kv.Value, &p); err != nil {
			s.lg.Warn("undecodable permission request in the session feed", zap.String("key", key), zap.Error(err))
			return FeedChange{}, false
		}
		return FeedChange{Session: sid, Perm: &p}, true
	}
	return FeedChange{}, false
}

// Replay calls fn with the session as it is, then (when from > 0) every
// message from seq from through the session's last, all read at one
// revision, and returns that last seq and the revision. A watcher that
// joined Feed before the replay began misses nothing (it skips by seq what
// it gets twice).
func (s *Store) Replay(ctx context.Context, sessionID string, from int64, fn func(Event) error) (int64, int64, error) {
	sess, rev, err := s.getSession(ctx, sessionID, 0)
	if err != nil {
		return 0, 0, err
	}
	if err := fn(Event{Session: sess}); err != nil {
		return 0, 0, err
	}
	for start := max(from, 1); from > 0 && start <= sess.LastSeq; {
		msgs, _, err := s.readRange(ctx, sessionID, start, sess.LastSeq, ExportPageSize, s.cfg.PageBytes, rev)
		if errs.HasReason(err, errs.ReasonBadPageToken) { // compacted under the replay (NOSPACE recovery)
			return 0, 0, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "the store compacted during the replay; watch again with start_seq")
		}
		if err != nil || len(msgs) == 0 {
			return 0, 0, errs.Internal(err, "replay transcript")
		}
		for _, m := range msgs {
			if err := fn(Event{Message: m}); err != nil {
				return 0, 0, err
			}
		}
		start = msgs[len(msgs)-1].Seq + 1
	}
	return sess.LastSeq, rev, nil
}

// GetPermission reads one permission request of the session.
func (s *Store) GetPermission(ctx context.Context, sessionID, rid string) (Permission, error) {
	p, _, found, err := getJSON[Permission](ctx, s.cli, s.permKey(sessionID, rid), "permission request")
	if err == nil && !found {
		err = errs.NotFound("permission request %s not found", rid)
	}
	return p, err
}
