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

// SetState records a session's run state for its owner (fenced by g like an
// owner-side append) and returns the session as stored. RUNNING (a turn
// starting) is refused with SESSION_FENCED while a migration fences the
// session: the fence is enforced here, in the txn, not by flags in memory.
//
// Every report also deletes the session's permission requests in the same
// txn: a turn starting or ending means no CLI waits on one asked before,
// and a dead request left pending was what `cast approve` (the oldest
// pending) answered, setting the session running while the next turn's
// CLI went on waiting on its own request.
func (s *Store) SetState(ctx context.Context, sessionID string, g fence.Guard, t fence.TurnState) (*castv1.Session, error) {
	defer s.observe("set_state", time.Now())
	gate := t.State == castv1.SessionState_SESSION_STATE_RUNNING
	dropPerms := clientv3.OpDelete(s.key("perms", sessionID)+"/", clientv3.WithPrefix())
	return s.mutateWith(ctx, sessionID, g, gate, []clientv3.Op{dropPerms}, func(sess *castv1.Session) error {
		if gate && t.Agent != "" && t.Agent != sess.Agent {
			// A switch to another agent was recorded before this start (in
			// this txn's order): the old agent must not run after it. A
			// switch sends no interrupt to a session that runs nothing, and
			// a parked one's node may have woken its held turn on a fleet
			// credential while the store still showed it parked; so the
			// start, not the interrupt, is where the two meet. The node
			// holds the turn until the switch's assignment reaches it.
			// A start naming no agent (a v0.1 node) is recorded: refused,
			// that node would hold the turn until its next wake, which
			// may never come, and the message would wait unanswered.
			return errs.New(errs.KindFailedPrecondition, errs.ReasonAgentSwitched,
				"session %s now runs %s, not %s: a switch came before this turn's start", sessionID, sess.Agent, t.Agent).
				With("agent", sess.Agent)
		}
		if gate && sess.Archived {
			// `cast rm` takes a session that runs nothing, a parked one
			// holding its prompt too: a fleet credential that wakes the
			// held turn afterwards must not run it in the archived
			// session. The node ends the turn failed, its prompt held.
			return errs.New(errs.KindFailedPrecondition, errs.ReasonSessionArchived,
				"session %s is archived and runs nothing; `cast fork %s` continues it in a new session", sessionID, sessionID).
				With("session", sessionID)
		}
		sess.State, sess.StateReason = t.State, t.Reason
		if t.State != castv1.SessionState_SESSION_STATE_RUNNING {
			// A turn ended: an interrupted one is no failure. Its exit code
			// (the CLI killed by the node's signal) is kept: a client older
			// than last_turn_interrupted still takes the turn for one that
			// did not succeed (`cast exec` exits non-zero), not a success.
			sess.LastTurnInterrupted = t.Interrupted && t.State == castv1.SessionState_SESSION_STATE_IDLE
			sess.LastExitCode = t.ExitCode
		}
		// An abandoned turn (a move, its node cut off or stopping) runs its
		// prompt again: until a turn starts or ends, the prompt's turn is
		// still to come, which `cast exec` waits for. Its exit code, kept
		// for clients older than the flag, is no turn's result once the
		// prompt runs again: `cast get` showed it as the last error then.
		if sess.LastTurnAbandoned && t.State == castv1.SessionState_SESSION_STATE_RUNNING {
			sess.LastExitCode = 0
		}
		sess.LastTurnAbandoned = t.Abandoned && t.State == castv1.SessionState_SESSION_STATE_IDLE
		sess.HeldSeq = 0
		if fence.Holds(t.State) {
			sess.HeldSeq = t.HeldSeq
		}
		sess.DeliveredSeq = max(sess.DeliveredSeq, t.DeliveredSeq)
		if t.Cwd != "" {
			sess.Cwd = t.Cwd
		}
		return nil
	})
}

// UpdateSession applies fn to the session record (agent, model, ...) in a
// read-modify-write txn; it is not owner-fenced.
func (s *Store) UpdateSession(ctx context.Context, sessionID string, fn func(*castv1.Session) error) (*castv1.Session, error) {
	defer s.observe("update_session", time.Now())
	return s.mutate(ctx, sessionID, fence.Guard{}, false, fn)
}

// mutate is an optimistic read-modify-write of the session record, also
// comparing the owner token when g has one.
// With gate, it also refuses while the session is fenced.
func (s *Store) mutate(ctx context.Context, sessionID string, g fence.Guard, gate bool, fn func(*castv1.Session) error) (*castv1.Session, error) {
	return s.mutateWith(ctx, sessionID, g, gate, nil, fn)
}

// mutateWith is mutate with also committed in the same txn as the record.
func (s *Store) mutateWith(ctx context.Context, sessionID string, g fence.Guard, gate bool, also []clientv3.Op, fn func(*castv1.Session) error) (*castv1.Session, error) {
	for attempt := 0; attempt < 10; attempt++ {
		resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.sessionKey(sessionID)), clientv3.OpGet(s.ownerKey(sessionID)),
			clientv3.OpGet(s.fenceKey(sessionID))).Commit()
		if err != nil {
			return nil, err
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, errs.NotFound("session %s not found; `cast ls` lists sessions", sessionID).With("session", sessionID)
		}
		if err := s.checkGuard(g, resp.Responses[1].GetResponseRange().Kvs); err != nil {
			return nil, err
		}
		if fk := resp.Responses[2].GetResponseRange().Kvs; gate && len(fk) > 0 {
			s.m.OwnerWritesRejected.WithLabelValues("fenced").Inc()
			return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonSessionFenced,
				"session %s is moving (migration %s); no turn starts until it lands", sessionID, fk[0].Value).
				With("migration", string(fk[0].Value))
		}
		sess := &castv1.Session{}
		if err := proto.Unmarshal(kvs[0].Value, sess); err != nil {
			return nil, errs.Internal(err, "decode session")
		}
		wasArchived := sess.Archived
		if err := fn(sess); err != nil {
			return nil, err
		}
		sess.UpdateTime = timestamppb.Now()
		sess.Node, sess.LastSeq, sess.FencedBy = "", 0, "" // live fields, derived on read
		val, err := proto.Marshal(sess)
		if err != nil {
			return nil, errs.Internal(err, "encode session")
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.sessionKey(sessionID)), "=", kvs[0].ModRevision)}
		if g.Token != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.ownerKey(sessionID)), "=", g.Token))
		}
		if gate {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.fenceKey(sessionID)), "=", 0))
		}
		ops := append([]clientv3.Op{clientv3.OpPut(s.sessionKey(sessionID), string(val))}, also...)
		if sess.Archived && !wasArchived {
			// The archive moves the seq key too (same value, a new
			// revision), which every append's txn compares: an open-only
			// append planned before this commit fails its txn and reads
			// the record again, which refuses it (commit.go).
			ops = append(ops, clientv3.OpPut(s.seqKey(sessionID), "", clientv3.WithIgnoreValue()))
		}
		tx, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		if tx.Succeeded {
			return s.GetSession(ctx, sessionID)
		}
		s.m.TxnConflicts.WithLabelValues("update_session").Inc()
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "session kept changing; retry")
}
