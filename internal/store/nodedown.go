package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// FailTurnsOfDownNode marks failed, with reason, every session node owns
// that shows a turn in flight: only its owner can end that, so a node that
// is gone leaves it shown. Each is one txn that commits only while node is down
// (no liveness key), still owns the session with the token it was read
// with, and the record is as read: a node that came back first, a report
// it made meanwhile, or a move, wins; and a node back later overwrites the
// failure with its own report (the owner token is untouched). It returns
// the sessions it marked.
//
// downRev is the revision at which node was seen down (the deletion of its
// liveness key), 0 when not known: the txn also requires the node's record
// unchanged since, so a node that came back and went down again meanwhile
// (a certificate renewal ends its stream twice in a row) is judged by its
// latest going down, with a grace of its own, not by the first.
func (s *Store) FailTurnsOfDownNode(ctx context.Context, node string, downRev int64, reason string) ([]*castv1.Session, error) {
	defer s.observe("fail_down_turns", time.Now())
	var out []*castv1.Session
	err := s.EachOwnedSession(ctx, node, func(page []fence.OwnedSession) error {
		for _, o := range page {
			if !fence.TurnInFlight(o.Session) {
				continue
			}
			sess, err := s.failIfDown(ctx, node, downRev, o, reason)
			if err != nil {
				return err
			}
			if sess != nil {
				out = append(out, sess)
			}
		}
		return nil
	})
	return out, err
}

// failIfDown marks o's session failed as FailTurnsOfDownNode says; nil
// when it did not (the node is back, the session moved or shows no turn).
func (s *Store) failIfDown(ctx context.Context, node string, downRev int64, o fence.OwnedSession, reason string) (*castv1.Session, error) {
	id := o.Session.Id
	for range 8 { // the record changed between read and write: read again
		resp, err := s.cli.Get(ctx, s.sessionKey(id))
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return nil, nil // purged
		}
		sess := &castv1.Session{}
		if err := proto.Unmarshal(resp.Kvs[0].Value, sess); err != nil {
			return nil, errs.Internal(err, "decode session")
		}
		if !fence.TurnInFlight(sess) {
			return nil, nil
		}
		sess.State, sess.StateReason, sess.UpdateTime = castv1.SessionState_SESSION_STATE_FAILED, reason, timestamppb.Now()
		val, err := proto.Marshal(sess)
		if err != nil {
			return nil, errs.Internal(err, "encode session")
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(s.sessionKey(id)), "=", resp.Kvs[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(s.ownerKey(id)), "=", o.Token),
			clientv3.Compare(clientv3.Value(s.ownerKey(id)), "=", node),
			clientv3.Compare(clientv3.CreateRevision(s.connKey(node)), "=", 0),
		}
		if downRev > 0 { // registering (or advertising) again writes the record
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.nodeKey(node)), "<", downRev))
		}
		tx, err := s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(s.sessionKey(id), string(val))).Else(
			clientv3.OpGet(s.connKey(node), clientv3.WithCountOnly()),
			clientv3.OpGet(s.ownerKey(id)),
			clientv3.OpGet(s.nodeKey(node)),
		).Commit()
		if err != nil {
			return nil, err
		}
		if tx.Succeeded {
			return s.GetSession(ctx, id)
		}
		own := tx.Responses[1].GetResponseRange().Kvs
		if tx.Responses[0].GetResponseRange().Count > 0 || len(own) == 0 || own[0].ModRevision != o.Token {
			return nil, nil // back, or moved: its owner reports
		}
		if rec := tx.Responses[2].GetResponseRange().Kvs; downRev > 0 && (len(rec) == 0 || rec[0].ModRevision >= downRev) {
			return nil, nil // back since downRev (its later going down has its own check), or removed
		}
		s.m.TxnConflicts.WithLabelValues("fail_down_turns").Inc()
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "session %s kept changing; its node's turn was left as it is", id)
}
