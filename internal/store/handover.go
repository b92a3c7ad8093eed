package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// The handover of one session between nodes, as three txns (see
// docs/architecture.md, "Migration"):
//
//	fence:    owner token unchanged, no fence, target connected
//	          -> put fence; record DRAINING_TURN
//	(wait until no turn is in flight: SetState(RUNNING) is refused while
//	 the fence exists, so none can start)
//	commit:   owner token unchanged, fence still ours, session and seq
//	          counter as read, target connected, record unchanged
//	          -> owner = target, fence lifted, the moved notice appended,
//	             record SUCCEEDED, all in one txn
//	unfence:  (rollback) fence still ours -> delete it; record the outcome
//
// Held user messages are not touched by the commit: they belong to the
// session, and the session's delivery cursor (delivered_seq) tells the new
// owner where to start, so the commit is a fixed handful of ops however
// many messages were held.

// FenceSession fences ms's session for migration migID. It is idempotent:
// a retry that finds its own fence returns that fence's revision. It
// returns the fence revision and the session record's new revision.
func (s *Store) FenceSession(ctx context.Context, migID string, ms *castv1.MigrationSession, msRev int64, target string) (int64, int64, error) {
	defer s.observe("fence_session", time.Now())
	next := proto.Clone(ms).(*castv1.MigrationSession)
	next.State, next.UpdateTime = castv1.MigrationState_MIGRATION_STATE_DRAINING_TURN, timestamppb.Now()
	val, err := proto.Marshal(next)
	if err != nil {
		return 0, 0, errs.Internal(err, "encode migration session")
	}
	sid, msKey := ms.SessionId, s.migSessKey(migID, ms.SessionId)
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.ownerKey(sid)), "=", ms.SourceToken),
		clientv3.Compare(clientv3.Value(s.ownerKey(sid)), "=", ms.SourceNode),
		clientv3.Compare(clientv3.CreateRevision(s.fenceKey(sid)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.connKey(target)), ">", 0),
		clientv3.Compare(clientv3.ModRevision(msKey), "=", msRev),
	).Then(
		clientv3.OpPut(s.fenceKey(sid), migID),
		clientv3.OpPut(msKey, string(val)),
	).Else(
		clientv3.OpGet(s.fenceKey(sid)),
		clientv3.OpGet(s.ownerKey(sid)),
		clientv3.OpGet(s.connKey(target)),
		clientv3.OpGet(msKey),
	).Commit()
	if err != nil {
		return 0, 0, err
	}
	if resp.Succeeded {
		proto.Reset(ms)
		proto.Merge(ms, next)
		return resp.Header.Revision, resp.Header.Revision, nil
	}
	fence := resp.Responses[0].GetResponseRange().Kvs
	own := resp.Responses[1].GetResponseRange().Kvs
	rec := resp.Responses[3].GetResponseRange().Kvs
	switch {
	case len(fence) > 0 && string(fence[0].Value) == migID && len(rec) > 0:
		return fence[0].ModRevision, rec[0].ModRevision, nil // our own fence: a retry
	case len(fence) > 0:
		return 0, 0, errs.New(errs.KindFailedPrecondition, errs.ReasonSessionFenced,
			"session %s is already being moved by migration %s", sid, fence[0].Value).With("migration", string(fence[0].Value))
	case len(own) == 0 || own[0].ModRevision != ms.SourceToken || string(own[0].Value) != ms.SourceNode:
		return 0, 0, errs.New(errs.KindFailedPrecondition, errs.ReasonNotOwner,
			"session %s changed owner since the migration started", sid)
	case len(resp.Responses[2].GetResponseRange().Kvs) == 0:
		return 0, 0, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
			"destination node %q is not connected", target).With("node", target)
	default:
		return 0, 0, errs.New(errs.KindAborted, errs.ReasonConflict, "migration %s session %s changed meanwhile", migID, sid)
	}
}

// WaitTurn returns once the session has no turn in flight, reading it at
// fromRev (the fence revision) and watching every change after it, so a
// turn that finished between the fence and the watch is not missed. Every
// tick it calls check with the session as last seen; check returning true
// stops the wait early (forced). Bounded by ctx.
func (s *Store) WaitTurn(ctx context.Context, sessionID string, fromRev int64, tick time.Duration, check func(*castv1.Session) (bool, error)) (*castv1.Session, bool, error) {
	sess, _, err := s.getSession(ctx, sessionID, fromRev)
	if errors.Is(err, rpctypes.ErrCompacted) {
		sess, fromRev, err = s.getSession(ctx, sessionID, 0)
	}
	if err != nil {
		return nil, false, err
	}
	if !fence.TurnInFlight(sess) {
		return sess, false, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.follow(wctx, s.sessionKey(sessionID), fromRev+1)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return sess, false, ctx.Err()
		case b, ok := <-wch:
			if !ok || b.Err != nil {
				// Compacted or refused (that follow is done): read now and
				// watch again from there.
				cur, rev, err := s.getSession(ctx, sessionID, 0)
				if err != nil {
					return sess, false, err
				}
				sess = cur
				if !fence.TurnInFlight(sess) {
					return sess, false, nil
				}
				wch = s.follow(wctx, s.sessionKey(sessionID), rev+1)
				continue
			}
			for _, ev := range b.Events {
				if ev.Type != clientv3.EventTypePut {
					return sess, false, errs.NotFound("session %s was deleted", sessionID)
				}
				cur := &castv1.Session{}
				if err := proto.Unmarshal(ev.Kv.Value, cur); err != nil {
					return sess, false, errs.Internal(err, "decode watched session")
				}
				sess = cur
			}
			if !fence.TurnInFlight(sess) {
				return sess, false, nil
			}
		case <-t.C:
			stop, err := check(sess)
			if err != nil || stop {
				return sess, stop, err
			}
		}
	}
}

// CommitHandover changes the owner to h.Target, lifts the fence, appends the
// notice and records SUCCEEDED in one txn, and returns the new owner token.
// A retry after an unknown outcome finds the record SUCCEEDED and returns
// the current token.
func (s *Store) CommitHandover(ctx context.Context, h fence.Handover) (int64, error) {
	defer s.observe("commit_handover", time.Now())
	sid := h.MS.SessionId
	msKey := s.migSessKey(h.MigID, sid)
	for range 20 {
		rd, err := s.cli.Txn(ctx).Then(
			clientv3.OpGet(s.sessionKey(sid)), clientv3.OpGet(s.seqKey(sid)), clientv3.OpGet(s.ownerKey(sid)),
			clientv3.OpGet(s.fenceKey(sid)), clientv3.OpGet(msKey), clientv3.OpGet(s.cidKey(sid, h.Notice.ClientId)),
			clientv3.OpGet(s.connKey(h.Target), clientv3.WithCountOnly()),
		).Commit()
		if err != nil {
			return 0, err
		}
		sessKV, seqKV, ownKV := rd.Responses[0].GetResponseRange().Kvs, rd.Responses[1].GetResponseRange().Kvs, rd.Responses[2].GetResponseRange().Kvs
		fenceKV, msKV := rd.Responses[3].GetResponseRange().Kvs, rd.Responses[4].GetResponseRange().Kvs
		if len(msKV) > 0 {
			cur := &castv1.MigrationSession{}
			if err := proto.Unmarshal(msKV[0].Value, cur); err == nil && cur.State == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED && len(ownKV) > 0 {
				return ownKV[0].ModRevision, nil // committed before: a retry
			}
		}
		if err := s.checkHandover(h, sessKV, seqKV, ownKV, fenceKV, msKV); err != nil {
			return 0, err
		}
		if rd.Responses[6].GetResponseRange().Count == 0 {
			return 0, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
				"destination node %q is not connected", h.Target).With("node", h.Target)
		}
		ops, cmps, err := s.handoverOps(ctx, h, sessKV[0].Value, seqKV[0].Value, len(rd.Responses[5].GetResponseRange().Kvs) > 0)
		if err != nil {
			return 0, err
		}
		cmps = append(cmps,
			clientv3.Compare(clientv3.ModRevision(s.ownerKey(sid)), "=", h.MS.SourceToken),
			clientv3.Compare(clientv3.Value(s.fenceKey(sid)), "=", h.MigID),
			clientv3.Compare(clientv3.ModRevision(s.sessionKey(sid)), "=", sessKV[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(s.seqKey(sid)), "=", seqKV[0].ModRevision),
			clientv3.Compare(clientv3.CreateRevision(s.connKey(h.Target)), ">", 0),
			clientv3.Compare(clientv3.ModRevision(msKey), "=", h.MSRev),
		)
		tx, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return 0, err
		}
		if tx.Succeeded {
			return tx.Header.Revision, nil
		}
		s.m.TxnConflicts.WithLabelValues("commit_handover").Inc() // a message or a state change raced us
	}
	return 0, errs.New(errs.KindAborted, errs.ReasonConflict, "session %s kept changing during the commit; retry", sid)
}

func (s *Store) checkHandover(h fence.Handover, sessKV, seqKV, ownKV, fenceKV, msKV []*mvccpb.KeyValue) error {
	sid := h.MS.SessionId
	switch {
	case len(sessKV) == 0 || len(seqKV) == 0:
		return errs.NotFound("session %s not found", sid).With("session", sid)
	case len(ownKV) == 0 || ownKV[0].ModRevision != h.MS.SourceToken:
		return errs.New(errs.KindFailedPrecondition, errs.ReasonNotOwner, "session %s changed owner since the migration started", sid)
	case len(fenceKV) == 0 || string(fenceKV[0].Value) != h.MigID:
		return errs.New(errs.KindAborted, errs.ReasonConflict, "session %s is no longer fenced by migration %s", sid, h.MigID)
	case len(msKV) == 0 || msKV[0].ModRevision != h.MSRev:
		return errs.New(errs.KindAborted, errs.ReasonConflict, "migration %s session %s changed meanwhile (cancelled?)", h.MigID, sid)
	}
	return nil
}

// handoverOps builds the commit's writes: owner, owner index, fence lift,
// session record (cwd, state), the notice, the migration record and, for a
// turn abandoned in flight, the release of its fleet reservation.
func (s *Store) handoverOps(ctx context.Context, h fence.Handover, sessVal, seqVal []byte, noticeStored bool) ([]clientv3.Op, []clientv3.Cmp, error) {
	sid := h.MS.SessionId
	sess, abandoned, err := handedOver(h, sessVal)
	if err != nil {
		return nil, nil, err
	}
	sessBytes, err := proto.Marshal(sess)
	if err != nil {
		return nil, nil, errs.Internal(err, "encode session")
	}
	ms := proto.Clone(h.MS).(*castv1.MigrationSession)
	ms.State, ms.DestCwd, ms.Reason, ms.UpdateTime = castv1.MigrationState_MIGRATION_STATE_SUCCEEDED, h.DestCwd, "", timestamppb.Now()
	msBytes, err := proto.Marshal(ms)
	if err != nil {
		return nil, nil, errs.Internal(err, "encode migration session")
	}
	ops := []clientv3.Op{
		clientv3.OpPut(s.ownerKey(sid), h.Target),
		clientv3.OpPut(s.nodeSessKey(h.Target, sid), ""),
		clientv3.OpDelete(s.fenceKey(sid)),
		clientv3.OpPut(s.sessionKey(sid), string(sessBytes)),
		clientv3.OpPut(s.migSessKey(h.MigID, sid), string(msBytes)),
		// A prompt pending on the source died with its turn; the
		// destination asks again.
		clientv3.OpDelete(s.key("perms", sid)+"/", clientv3.WithPrefix()),
	}
	if h.MS.SourceNode != h.Target {
		ops = append(ops, clientv3.OpDelete(s.nodeSessKey(h.MS.SourceNode, sid)),
			// Where the source's last move of it went: read when the source
			// reconnects still listing it (MovedFrom).
			clientv3.OpPut(s.migratedKey(sid, h.MS.SourceNode), h.Target))
	}
	if abandoned {
		// The abandoned turn held a fleet reservation (if any) whose end no
		// node reports now; left to its lease it would count against the
		// account for up to reservationTTL. Its lease, keyless, expires.
		ops = append(ops, clientv3.OpDelete(s.reservationKey(sess.Agent, sid)))
	}
	if noticeStored {
		return ops, nil, nil
	}
	nops, cmps, err := s.noticeOps(ctx, h, seqVal)
	return append(ops, nops...), cmps, err
}

// handedOver is the session record as the handover leaves it, and whether
// a turn was abandoned in flight on the source.
func handedOver(h fence.Handover, sessVal []byte) (*castv1.Session, bool, error) {
	sess := &castv1.Session{}
	if err := proto.Unmarshal(sessVal, sess); err != nil {
		return nil, false, errs.Internal(err, "decode session")
	}
	if h.DestCwd != "" {
		sess.Cwd = h.DestCwd
	}
	// The checkout a thread's workspaces came from is a path on the source
	// node; the destination finds its own from the cwd.
	sess.Checkout = ""
	abandoned := fence.TurnInFlight(sess) // on a source that went away
	if abandoned {
		// Its prompt runs again on the destination, as a turn the source
		// reported abandoned.
		sess.State, sess.StateReason, sess.LastTurnAbandoned = castv1.SessionState_SESSION_STATE_IDLE, "", true
	}
	// The destination runs what a failed turn on the source held (it
	// never heard of that failure): those messages wait no longer.
	sess.HeldSeq = 0
	sess.UpdateTime = timestamppb.Now()
	return sess, abandoned, nil
}

// noticeOps appends the handover's notice after the last seq (seqVal),
// guarded by its client id, as an append would.
func (s *Store) noticeOps(ctx context.Context, h fence.Handover, seqVal []byte) ([]clientv3.Op, []clientv3.Cmp, error) {
	sid := h.MS.SessionId
	last, err := parseInt(seqVal)
	if err != nil {
		return nil, nil, errs.Internal(err, "corrupt seq counter")
	}
	n := proto.Clone(h.Notice).(*castv1.Message)
	n.Seq = 0
	if n.CreateTime == nil {
		n.CreateTime = timestamppb.Now()
	}
	p, err := s.prepare(ctx, sid, n)
	if err != nil {
		return nil, nil, err
	}
	seq := last + 1
	ops := []clientv3.Op{
		clientv3.OpPut(s.msgKey(sid, seq), string(p.envelope)),
		clientv3.OpPut(s.cidKey(sid, n.ClientId), newCidRecord(seq, p).String()),
		clientv3.OpPut(s.seqKey(sid), formatInt(seq)),
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.cidKey(sid, n.ClientId)), "=", 0)}, p.cmps...)
	return ops, cmps, nil
}

// Unfence rolls a session's migration back: it lifts the fence if it is
// still this migration's, and records ms (FAILED or CANCELLED) in the same
// txn. Idempotent.
func (s *Store) Unfence(ctx context.Context, migID string, ms *castv1.MigrationSession, msRev int64) (int64, error) {
	defer s.observe("unfence", time.Now())
	ms.UpdateTime = timestamppb.Now()
	val, err := proto.Marshal(ms)
	if err != nil {
		return 0, errs.Internal(err, "encode migration session")
	}
	sid, msKey := ms.SessionId, s.migSessKey(migID, ms.SessionId)
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(s.fenceKey(sid)), "=", migID),
		clientv3.Compare(clientv3.ModRevision(msKey), "=", msRev),
	).Then(clientv3.OpDelete(s.fenceKey(sid)), clientv3.OpPut(msKey, string(val))).Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	// Not fenced by us: the fence txn never landed, or this is a retry of
	// an unfence that did. Record the outcome, unless it is recorded.
	cur, err := s.cli.Get(ctx, msKey)
	if err != nil {
		return 0, err
	}
	if len(cur.Kvs) > 0 {
		got := &castv1.MigrationSession{}
		if proto.Unmarshal(cur.Kvs[0].Value, got) == nil && got.State == ms.State && got.Reason == ms.Reason {
			return cur.Kvs[0].ModRevision, nil
		}
	}
	return s.UpdateMigrationSession(ctx, migID, ms, msRev)
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
