package node

import (
	"context"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// assignSession takes the session an assignment gives the node: the
// store's cursors when it holds less than the node took, the assigned
// session's fields, and the messages sent while the node was away.
func (a *Daemon) assignSession(ctx context.Context, as *castv1.AssignSession) error {
	s, token := as.Session, as.OwnerToken
	a.lg.Info("session assigned", zap.String("session", s.Id), zap.String("agent", s.Agent))
	lastSeq := s.LastSeq
	if behind := a.storeBehind(ctx, s); behind != nil {
		lastSeq = max(lastSeq, behind.LastSeq)
		if err := a.rewindIdle(s.Id, storeDelivered(behind), lastSeq, token); err != nil {
			return err
		}
	}
	if err := a.st.assign(s.Id, func(o *owned) { assigned(o, s, token) }); err != nil {
		return err
	}
	a.dropStaleNote(s)
	a.dropImportedMarkers(s)
	a.reconcileState(s.Id, s.State)
	if err := a.catchUp(ctx, s.Id, lastSeq, token); err != nil {
		// The control plane only logs a command's error: the node
		// tries again itself, or the messages sent while it was away
		// waited for the next one (or a reconnect).
		a.retryCatchUp(s.Id, lastSeq, token)
		return err
	}
	return nil
}

// assigned updates node state o with the session s assigned to the node
// under owner token token.
func assigned(o *owned, s *castv1.Session, token int64) {
	if o.Agent != "" && o.Agent != s.Agent {
		// Switched: what failed for the old agent goes to the new one.
		o.FailedSeq = 0
	}
	if movedAway(*o, s) {
		// Its folder changed while this node did not hear of it (a
		// workspace move it recorded before a crash): native
		// sessions belong to their folder, so the next turn rebuilds.
		o.Native = nil
	}
	o.Token, o.Agent, o.Model, o.Effort, o.Cwd = max(o.Token, token), s.Agent, s.Model, s.Effort, s.Cwd
	o.Account, o.WorktreeBranch = s.Account, s.WorktreeBranch
	if s.Checkout != "" {
		o.Checkout = s.Checkout
	}
	// Imported or forked history is context, never a new prompt;
	// what an earlier owner delivered (before a migration) is done.
	if to := max(s.HistorySeq, s.DeliveredSeq); to > o.ReceivedSeq {
		o.ReceivedSeq, o.ReceivedID = to, ""
	}
	o.DeliveredSeq = max(o.DeliveredSeq, s.HistorySeq, s.DeliveredSeq)
}

// storeBehind is the store's session when it holds less of it than this
// node took (nil otherwise): a store restored from an older snapshot gives
// the messages sent since seqs the node already received or delivered,
// and the node counted them as delivered, so they never ran. Its last
// seq below the node's received one, or its delivery cursor below the
// node's with no report of the node's on its way, says so; the store is
// read again to tell, since an assignment may have been read before a
// message the node already took, or before its last report landed. With
// a report on its way, the cursors cannot tell (enough messages sent
// since the restore reach the node's seqs, and the report would set the
// store's cursor past them): the store's row at the node's received seq
// being another message does. A session whose turn runs is read too: its
// cursors are those the turn started from, and rewindIdle has the turn's
// end take the store's.
func (a *Daemon) storeBehind(ctx context.Context, s *castv1.Session) *castv1.Session {
	o, ok := a.st.get(s.Id)
	if !ok || !heldPast(o, s) && !reportHides(o, s) {
		return nil
	}
	now, err := a.cli.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: s.Id})
	if err != nil {
		a.lg.Warn("reading the session to check the node's delivery cursor failed", zap.String("session", s.Id), zap.Error(err))
		return nil
	}
	if !heldPast(o, now) && !(reportHides(o, now) && a.receivedReplaced(ctx, s.Id, o)) {
		return nil
	}
	a.lg.Warn("the store holds less of the session than this node delivered (restored from an older snapshot?); taking its delivery cursor",
		zap.String("session", s.Id), zap.Int64("node_received", o.ReceivedSeq), zap.Int64("node_delivered", o.DeliveredSeq),
		zap.Int64("store_last", now.LastSeq), zap.Int64("store_delivered", storeDelivered(now)))
	return now
}

// heldPast reports whether node state o is past what the store's session
// s holds: a received seq past its last one, or a delivery cursor past
// its own that no pending report of the node's explains.
func heldPast(o owned, s *castv1.Session) bool {
	return s.LastSeq < o.ReceivedSeq || (!reportPending(o) && storeDelivered(s) < o.DeliveredSeq)
}

// reportHides reports whether the store's delivery cursor is below the
// node's while a report of the node's is pending, and the node knows the
// message at its received seq to check the store against.
func reportHides(o owned, s *castv1.Session) bool {
	return reportPending(o) && storeDelivered(s) < o.DeliveredSeq && o.ReceivedID != ""
}

func reportPending(o owned) bool { return o.Report != nil && o.Report.Pending }

// receivedReplaced reports whether the store's row at the node's received
// seq is not the message the node received there (a read that fails
// says no: the cursors stay, as before).
func (a *Daemon) receivedReplaced(ctx context.Context, sessionID string, o owned) bool {
	replaced := true
	err := a.cli.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: sessionID, StartSeq: o.ReceivedSeq, EndSeq: o.ReceivedSeq},
		func(m *castv1.Message) error {
			replaced = m.Seq != o.ReceivedSeq || m.ClientId != o.ReceivedID
			return nil
		})
	if err != nil {
		a.lg.Warn("reading the message at the node's received seq failed", zap.String("session", sessionID), zap.Error(err))
		return false
	}
	return replaced
}

// storeDelivered is the store's delivery cursor of s: imported or forked
// history counts as delivered.
func storeDelivered(s *castv1.Session) int64 {
	return max(s.DeliveredSeq, s.HistorySeq)
}

// rewindIdle rewinds the session's cursors to the store's delivery cursor
// to under the worker's lock: a turn reads the state it starts from under
// it, so none starts from the cursors as they were and moves them forward
// again at its end. While a turn runs, its end takes them back instead
// (pendingRewind): left alone until the next assignment (a reconnect, a
// move), they counted the messages sent since the restore, whose seqs
// the node had already taken, as delivered.
func (a *Daemon) rewindIdle(sessionID string, to, lastSeq, token int64) error {
	w := a.worker(sessionID)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		a.lg.Warn("a turn runs: its end takes the store's delivery cursor", zap.String("session", sessionID), zap.Int64("to", to))
		if w.rewind == nil || to < w.rewind.to {
			w.rewind = &pendingRewind{to: to}
		}
		w.rewind.lastSeq, w.rewind.token = max(w.rewind.lastSeq, lastSeq), max(w.rewind.token, token)
		return nil
	}
	return a.st.session(sessionID, func(o *owned) { rewind(o, to) })
}

// pendingRewind is a rewind to the store's delivery cursor that waits for
// the session's running turn to end.
type pendingRewind struct {
	// to is the store's delivery cursor, lastSeq its last seq then.
	to, lastSeq, token int64
	// applied: the turn's end report took it; what is left is the
	// catch-up of the messages past it (afterTurn).
	applied bool
}

// takeRewind is the store's delivery cursor a turn's end takes before it
// reports (false when no rewind waits): the report then carries it, not
// the node's cursor, which the store may have given to other messages.
func (a *Daemon) takeRewind(sessionID string) (int64, bool) {
	w := a.workers.get(sessionID)
	if w == nil {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rewind == nil || w.rewind.applied {
		return 0, false
	}
	w.rewind.applied = true
	return w.rewind.to, true
}

// afterTurn settles a rewind that waited for the turn that just ended
// (w.cancel cleared): one the turn's end did not take (it reported
// nothing, or the assignment came as it reported) is taken now and its
// report sent again; then the store's messages past the cursor, read up
// to its last seq now, are caught up, since those delivered while the
// turn ran were taken for ones the node had.
func (a *Daemon) afterTurn(ctx context.Context, sessionID string, w *worker) {
	w.mu.Lock()
	rw := w.rewind
	w.rewind = nil
	if rw != nil && !rw.applied {
		_ = a.st.session(sessionID, func(o *owned) {
			rewind(o, rw.to)
			if o.Report != nil {
				o.Report.Pending = true // it may have carried the old cursor
			}
		})
	}
	w.mu.Unlock()
	if rw == nil {
		return
	}
	lastSeq := rw.lastSeq
	now, err := a.cli.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: sessionID})
	if err == nil {
		lastSeq = max(lastSeq, now.LastSeq)
		err = a.catchUp(ctx, sessionID, lastSeq, rw.token)
	}
	if err != nil {
		a.lg.Warn("catching up after taking the store's delivery cursor failed; trying again", zap.String("session", sessionID), zap.Error(err))
		a.retryCatchUp(sessionID, lastSeq, rw.token)
	}
}

// rewind takes o's cursors back to the store's delivery cursor to: the
// store's messages past it run, and every native session that holds
// rows past it is rebuilt, since the store may have given those seqs to
// other rows.
func rewind(o *owned, to int64) {
	if o.ReceivedSeq > to {
		o.ReceivedSeq, o.ReceivedID = to, ""
	}
	o.DeliveredSeq, o.NoticeSeq = min(o.DeliveredSeq, to), min(o.NoticeSeq, to)
	if o.FailedSeq > to {
		o.FailedSeq = 0
	}
	for _, ns := range o.Native {
		if ns.KnownUpto > to {
			ns.Stale = true
		}
	}
}
