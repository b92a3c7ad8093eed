package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/transcript"
)

// job moves one session of a migration. Each step reads the session's
// record, acts, and records the next state with a compare-and-swap, so a
// job restarted from any point (control plane restart, a second runner)
// continues from what the store says.
type job struct {
	mg     *Manager
	migID  string
	sid    string
	target string
	wait   time.Duration
	skipWT bool
	// cleanSource: the source stashes the moved changes once released.
	cleanSource bool
	cancel      <-chan struct{}
}

// failure is a reason to roll the session back (FAILED), as opposed to an
// infrastructure error worth retrying.
type failure struct{ reason string }

func (f *failure) Error() string { return f.reason }

func fail(format string, args ...any) error { return &failure{reason: fmt.Sprintf(format, args...)} }

func (j *job) run(ctx context.Context) error {
	for attempt := 0; attempt < 50; attempt++ {
		rec, err := j.mg.st.GetMigration(ctx, j.migID)
		if err != nil {
			return err
		}
		ms, rev := find(rec, j.sid)
		if ms == nil || Terminal(ms.State) {
			return nil
		}
		if rec.M.CancelRequested && ms.State < castv1.MigrationState_MIGRATION_STATE_COMMITTING {
			return j.rollback(ctx, ms, rev, castv1.MigrationState_MIGRATION_STATE_CANCELLED, "cancelled by request")
		}
		err = j.step(ctx, ms, rev)
		var f *failure
		switch {
		case err == nil:
			continue
		case errors.As(err, &f):
			return j.rollback(ctx, ms, rev, castv1.MigrationState_MIGRATION_STATE_FAILED, f.reason)
		case errs.HasReason(err, errs.ReasonConflict):
			continue // the record moved under us (cancel, another runner): reread
		case ctx.Err() != nil:
			return ctx.Err()
		case isTerminalStoreErr(err):
			return j.rollback(ctx, ms, rev, castv1.MigrationState_MIGRATION_STATE_FAILED, err.Error())
		default:
			j.mg.lg.Warn("migration step failed; retrying", zap.String("session", j.sid), zap.Error(err))
			if !j.sleep(ctx, time.Second) {
				continue
			}
		}
	}
	return fmt.Errorf("migration %s session %s: too many attempts", j.migID, j.sid)
}

func isTerminalStoreErr(err error) bool {
	for _, r := range []string{errs.ReasonNotOwner, errs.ReasonSessionFenced, errs.ReasonNodeNotConn, errs.ReasonNotFound} {
		if errs.HasReason(err, r) {
			return true
		}
	}
	return false
}

// step performs the session's current phase.
func (j *job) step(ctx context.Context, ms *castv1.MigrationSession, rev int64) error {
	start := time.Now()
	switch ms.State {
	case castv1.MigrationState_MIGRATION_STATE_PENDING, castv1.MigrationState_MIGRATION_STATE_FENCING:
		fenceRev, _, err := j.mg.st.FenceSession(ctx, j.migID, ms, rev, j.target)
		if err != nil {
			return err
		}
		j.observe(metrics.PhaseFence, start)
		j.mg.lg.Info("session fenced", zap.String("migration", j.migID), zap.String("session", j.sid), zap.Int64("fence_rev", fenceRev))
		j.mg.failpoint("migrate.after-fence")
		return nil
	case castv1.MigrationState_MIGRATION_STATE_DRAINING_TURN:
		return j.drain(ctx, ms, rev, start)
	case castv1.MigrationState_MIGRATION_STATE_MOVING_WORKTREE:
		cwd, err := j.moveWorkTree(ctx, ms)
		if err != nil {
			return err
		}
		ms.DestCwd, ms.State = cwd, castv1.MigrationState_MIGRATION_STATE_COMMITTING
		if _, err := j.mg.st.UpdateMigrationSession(ctx, j.migID, ms, rev); err != nil {
			return err
		}
		j.observe(metrics.PhaseWorktree, start)
		j.mg.failpoint("migrate.after-worktree")
		return nil
	case castv1.MigrationState_MIGRATION_STATE_COMMITTING:
		return j.commit(ctx, ms, rev, start)
	}
	return fmt.Errorf("unknown migration state %v", ms.State)
}

// absence counts how long a migration's source has been disconnected.
type absence struct {
	since time.Time
	grace time.Duration
}

// over notes the source away and reports whether it has been for grace.
func (a *absence) over() bool {
	if a.since.IsZero() {
		a.since = time.Now()
	}
	return time.Since(a.since) >= a.grace
}

// back notes the source connected: an absence counts from its next drop.
func (a *absence) back() { a.since = time.Time{} }

// waitAway waits while node is away for less than its grace: a source
// shows no turn once the liveness check failed it (after half a lease),
// yet may still run it.
func (j *job) waitAway(ctx context.Context, node string, away *absence) error {
	for !j.cancelled() {
		up, err := j.mg.st.NodeConnected(ctx, node)
		if err != nil {
			return err
		}
		if up || away.over() {
			return nil
		}
		j.sleep(ctx, j.mg.cfg.Tick)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// drain waits for the in-flight turn, from the fence revision on. A session
// at a permission prompt is interrupted at once (the prompt is asked again
// on the destination); a turn still running when --wait runs out is
// interrupted; a source node that is gone is not waited for once it has
// been away for SourceGrace (by then it stopped its agents itself), or at
// once when the move takes the work tree (its export needs the source).
func (j *job) drain(ctx context.Context, ms *castv1.MigrationSession, rev int64, start time.Time) error {
	fromRev := ms.FenceRevision
	if fromRev == 0 {
		fromRev = rev // the fence txn wrote this record at the fence's revision
	}
	d := j.newDrainWait(ms)
	wctx, stopWait := j.untilCancelled(ctx)
	defer stopWait()
	_, _, err := j.mg.st.WaitTurn(wctx, j.sid, fromRev, j.mg.cfg.Tick, func(cur *castv1.Session) (bool, error) {
		return d.drained(ctx, cur)
	})
	if err != nil && (ctx.Err() != nil || !j.cancelled()) {
		return err
	}
	if err := j.waitAway(ctx, ms.SourceNode, d.away); err != nil {
		return err
	}
	if j.cancelled() {
		return errs.New(errs.KindAborted, errs.ReasonConflict, "cancelled") // reread: run() rolls back
	}
	j.observe(metrics.PhaseDrain, start)
	j.mg.failpoint("migrate.after-drain")
	ms.State = castv1.MigrationState_MIGRATION_STATE_MOVING_WORKTREE
	if ms.FenceRevision == 0 {
		ms.FenceRevision = fromRev
	}
	_, err = j.mg.st.UpdateMigrationSession(ctx, j.migID, ms, rev)
	return err
}

// untilCancelled is ctx, ended as soon as the migration is cancelled, not
// at the next tick of a wait under it: with j.cancel (closed here, or by
// the watch on the header for a cancel asked on another replica).
func (j *job) untilCancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, stop := context.WithCancel(ctx)
	go func() {
		select {
		case <-j.cancel:
			stop()
		case <-wctx.Done():
		}
	}()
	return wctx, stop
}

// drainWait is a drain's wait on the in-flight turn of ms: when --wait
// runs out, when the turn was interrupted, the source's absence.
type drainWait struct {
	j        *job
	ms       *castv1.MigrationSession
	deadline time.Time
	stopAt   time.Time
	away     *absence
}

func (j *job) newDrainWait(ms *castv1.MigrationSession) *drainWait {
	// A source away for less than its lease may be a blip with its turn
	// still running: a move that skips the work tree would commit past it.
	// A move that takes the work tree needs the source itself next, and
	// fails while it is down (nothing moves), so it waits no grace.
	away := &absence{grace: j.mg.cfg.SourceGrace}
	if !j.skipWT && ms.SourceCwd != "" {
		away.grace = 0
	}
	return &drainWait{j: j, ms: ms, deadline: time.Now().Add(j.wait), away: away}
}

// drained reports whether the wait is over given the session as it is
// now (cur), interrupting a turn at a permission prompt or past --wait.
func (d *drainWait) drained(ctx context.Context, cur *castv1.Session) (bool, error) {
	j := d.j
	if j.cancelled() {
		return true, nil
	}
	if up, err := j.mg.st.NodeConnected(ctx, d.ms.SourceNode); err == nil && !up {
		return d.away.over(), nil // less than its grace: a blip, its turn may still run
	}
	d.away.back()
	switch {
	case cur.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION:
		return false, d.interrupt(ctx, "waiting on a permission prompt")
	case time.Now().After(d.deadline):
		if !d.stopAt.IsZero() && time.Since(d.stopAt) > j.mg.cfg.StopGrace {
			return false, fail("the turn on %s did not stop within %s of the interrupt", d.ms.SourceNode, j.mg.cfg.StopGrace)
		}
		return false, d.interrupt(ctx, "--wait ran out")
	}
	return false, nil
}

// interrupt asks the source to abandon the turn (why: for the log), again
// every ResendEvery while it runs.
func (d *drainWait) interrupt(ctx context.Context, why string) error {
	j := d.j
	if !d.stopAt.IsZero() && time.Since(d.stopAt) < j.mg.cfg.ResendEvery {
		return nil
	}
	if d.stopAt.IsZero() {
		d.stopAt = time.Now()
		j.mg.lg.Info("interrupting in-flight turn of moving session", zap.String("session", j.sid), zap.String("why", why))
	}
	d.ms.Interrupted = true
	return j.mg.st.RequestOp(ctx, j.sid, fence.OpAbandon)
}

// commit is the handover txn, then cleanup.
func (j *job) commit(ctx context.Context, ms *castv1.MigrationSession, rev int64, start time.Time) error {
	cwd := ms.DestCwd
	if cwd == "" {
		cwd = ms.SourceCwd
	}
	notice := &castv1.Message{
		ClientId: "migrated-" + j.migID, Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeMigration,
		Text: fmt.Sprintf("This session just moved to a different machine. It now runs on %s in %s (previously %s). "+
			"Processes, ports and files outside the working tree did not move: start again any server, watcher or "+
			"background job you need, and do not assume anything outside %s is still there.", j.target, cwd, ms.SourceNode, cwd),
	}
	tok, err := j.mg.st.CommitHandover(ctx, fence.Handover{MigID: j.migID, MS: ms, MSRev: rev, Target: j.target, DestCwd: ms.DestCwd, Notice: notice})
	if err != nil {
		return err
	}
	j.observe(metrics.PhaseCommit, start)
	j.mg.m.Sessions.WithLabelValues("succeeded").Inc()
	j.mg.lg.Info("session moved", zap.String("migration", j.migID), zap.String("session", j.sid),
		zap.String("from", ms.SourceNode), zap.String("to", j.target), zap.Int64("token", tok))
	j.mg.failpoint("migrate.after-commit")
	if err := j.mg.st.DeleteWorkTree(ctx, j.migID, j.sid); err != nil {
		j.mg.lg.Warn("delete relayed work tree failed", zap.String("session", j.sid), zap.Error(err))
	}
	return nil
}

// rollback lifts the fence (if it is still this migration's) and records
// the outcome; the source keeps the session and is told to look again at
// what was held.
func (j *job) rollback(ctx context.Context, ms *castv1.MigrationSession, rev int64, state castv1.MigrationState, reason string) error {
	out := proto.Clone(ms).(*castv1.MigrationSession)
	out.State, out.Reason = state, reason
	if _, err := j.mg.st.Unfence(ctx, j.migID, out, rev); err != nil {
		return err
	}
	j.mg.m.Sessions.WithLabelValues(StateName(state)).Inc()
	j.mg.lg.Info("session migration rolled back", zap.String("migration", j.migID), zap.String("session", j.sid),
		zap.String("state", StateName(state)), zap.String("reason", reason))
	if err := j.mg.st.RequestOp(ctx, j.sid, fence.OpRefresh); err != nil {
		j.mg.lg.Warn("refresh after rollback failed", zap.String("session", j.sid), zap.Error(err))
	}
	_ = j.mg.st.DeleteWorkTree(ctx, j.migID, j.sid)
	return nil
}

// importResult is what the destination reports after an import.
type importResult struct {
	Error string `json:"error,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
}

// moveWorkTree relays the work tree: the source uploads a bundle, the
// destination checks it out at its path for the session's cwd. It returns
// that path. A failure on either side rolls the session back: nothing has
// moved yet.
func (j *job) moveWorkTree(ctx context.Context, ms *castv1.MigrationSession) (string, error) {
	skip := j.skipWT || ms.SourceCwd == ""
	if !skip {
		if _, ok, err := j.mg.st.WorkTreeRecord(ctx, j.migID, j.sid, fence.WorkTreeManifest); err != nil {
			return "", err
		} else if !ok {
			// A source that is down cannot show its checkout: say so at once
			// instead of waiting out a resend for every session.
			if up, err := j.mg.st.NodeConnected(ctx, ms.SourceNode); err != nil {
				return "", err
			} else if !up {
				return "", fail("node %s is down, so the work tree at %s cannot be read; `--skip-worktree` moves the conversation only", ms.SourceNode, ms.SourceCwd)
			}
			cmd := &castv1.Command{Kind: &castv1.Command_ExportWorkTree{ExportWorkTree: &castv1.ExportWorkTree{
				MigrationId: j.migID, SessionId: j.sid, Cwd: ms.SourceCwd, CleanSource: j.cleanSource, TargetNode: j.target}}}
			if err := j.relay(ctx, ms.SourceNode, cmd, func() (bool, error) {
				if why, ok, err := j.mg.st.WorkTreeRecord(ctx, j.migID, j.sid, fence.WorkTreeExportError); err != nil || ok {
					if ok {
						return false, fail("work tree not movable from %s: %s", ms.SourceNode, why)
					}
					return false, err
				}
				_, ok, err := j.mg.st.WorkTreeRecord(ctx, j.migID, j.sid, fence.WorkTreeManifest)
				return ok, err
			}); err != nil {
				return "", err
			}
		}
	}
	cmd := &castv1.Command{Kind: &castv1.Command_ImportWorkTree{ImportWorkTree: &castv1.ImportWorkTree{
		MigrationId: j.migID, SessionId: j.sid, SourceCwd: ms.SourceCwd, SourceNode: ms.SourceNode, Skip: skip}}}
	var res importResult
	err := j.relay(ctx, j.target, cmd, func() (bool, error) {
		raw, ok, err := j.mg.st.WorkTreeRecord(ctx, j.migID, j.sid, fence.WorkTreeImport)
		if err != nil || !ok {
			return false, err
		}
		if err := json.Unmarshal([]byte(raw), &res); err != nil {
			return false, err
		}
		if res.Error != "" {
			return false, fail("work tree could not be set up on %s: %s", j.target, res.Error)
		}
		return true, nil
	})
	return res.Cwd, err
}

// relay sends cmd to node (again every ResendEvery while unanswered) and
// polls done until it reports true, fails, or WorkTreeTimeout passes.
func (j *job) relay(ctx context.Context, node string, cmd *castv1.Command, done func() (bool, error)) error {
	deadline := time.Now().Add(j.mg.cfg.WorkTreeTimeout)
	var sent time.Time
	// A skip or a small tree answers in milliseconds: poll from 5ms,
	// doubling up to a tick.
	pauses := retry.Policy{Min: 5 * time.Millisecond, Max: j.mg.cfg.Tick}.Pauses()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if j.cancelled() {
			return errs.New(errs.KindAborted, errs.ReasonConflict, "cancelled")
		}
		if time.Now().After(deadline) {
			return fail("node %s did not answer within %s", node, j.mg.cfg.WorkTreeTimeout)
		}
		if time.Since(sent) > j.mg.cfg.ResendEvery {
			if up, err := j.mg.st.NodeConnected(ctx, node); err == nil && !up && !sent.IsZero() {
				return fail("node %s is not connected", node)
			}
			cmd.Id = ids.NewClientID()
			if err := j.mg.st.SendNodeCommand(ctx, node, cmd); err != nil {
				return err
			}
			sent = time.Now()
		}
		if !j.sleep(ctx, pauses.Next()) {
			return errs.New(errs.KindAborted, errs.ReasonConflict, "cancelled")
		}
	}
}

// sleep waits d; false when the migration was cancelled meanwhile.
func (j *job) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return true
	case <-j.cancel:
		return false
	}
}

func (j *job) cancelled() bool {
	select {
	case <-j.cancel:
		return true
	default:
		return false
	}
}

func (j *job) observe(phase string, start time.Time) {
	j.mg.m.PhaseSeconds.WithLabelValues(phase).Observe(time.Since(start).Seconds())
}

func find(rec *fence.MigrationRecord, sid string) (*castv1.MigrationSession, int64) {
	for _, ms := range rec.M.Sessions {
		if ms.SessionId == sid {
			return ms, rec.SessRevs[sid]
		}
	}
	return nil, 0
}
