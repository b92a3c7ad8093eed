package store

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Event is one change to a session: exactly one field is set.
type Event struct {
	Message *castv1.Message
	Session *castv1.Session
}

// Watch calls fn with the session as it is, then (when startSeq > 0) every
// message from startSeq on, then each change as it happens, until ctx ends
// or fn fails. The replay and the live watch meet at one revision, so no
// message is missed or sent twice.
func (s *Store) Watch(ctx context.Context, sessionID string, startSeq int64, fn func(Event) error) error {
	sess, rev, err := s.getSession(ctx, sessionID, 0)
	if err != nil {
		return err
	}
	if err := fn(Event{Session: sess}); err != nil {
		return err
	}
	for start := max(startSeq, 1); startSeq > 0 && start <= sess.LastSeq; {
		msgs, _, err := s.readRange(ctx, sessionID, start, sess.LastSeq, ExportPageSize, rev)
		if err != nil || len(msgs) == 0 {
			return errs.Internal(err, "replay transcript")
		}
		for _, m := range msgs {
			if err := fn(Event{Message: m}); err != nil {
				return err
			}
		}
		start = msgs[len(msgs)-1].Seq + 1
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	msgCh := s.cli.Watch(wctx, s.msgPrefix(sessionID), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	sessCh := s.cli.Watch(wctx, s.sessionKey(sessionID), clientv3.WithRev(rev+1))
	ownCh := s.cli.Watch(wctx, s.ownerKey(sessionID), clientv3.WithRev(rev+1))
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case wr, ok = <-msgCh:
		case wr, ok = <-sessCh:
		case wr, ok = <-ownCh:
		}
		if !ok || wr.Canceled {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(wr.Err(), rpctypes.ErrCompacted) {
				return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "watch fell behind the store's history; watch again with start_seq")
			}
			return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "watch interrupted; watch again with start_seq")
		}
		if err := s.emit(ctx, sessionID, wr, fn); err != nil {
			return err
		}
	}
}

func (s *Store) emit(ctx context.Context, sessionID string, wr clientv3.WatchResponse, fn func(Event) error) error {
	sessionChanged := false
	for _, ev := range wr.Events {
		if ev.Type != clientv3.EventTypePut {
			continue
		}
		key := string(ev.Kv.Key)
		if len(key) > len(s.msgPrefix(sessionID)) && key[:len(s.msgPrefix(sessionID))] == s.msgPrefix(sessionID) {
			m, err := s.decodeKV(ctx, sessionID, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
			if err != nil {
				return errs.Internal(err, "decode watched message")
			}
			if err := fn(Event{Message: m}); err != nil {
				return err
			}
			continue
		}
		sessionChanged = true
	}
	if !sessionChanged {
		return nil
	}
	sess, err := s.GetSession(ctx, sessionID)
	if err != nil {
		return err
	}
	return fn(Event{Session: sess})
}
