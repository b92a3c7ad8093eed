package node

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/wire"
)

// turnReport is the state a session's last turn ended in, kept in
// state.json until the control plane has recorded it: a report that could
// not be sent (the control plane was down, or stopping, or the node was
// killed after the turn) is sent again until it lands, so no session stays
// `running` with no turn behind it.
type turnReport struct {
	State    castv1.SessionState `json:"state"`
	Reason   string              `json:"reason,omitempty"`
	ExitCode int                 `json:"exit_code"`
	// Interrupted: the turn ended because someone stopped it (an IDLE
	// report); ExitCode is the CLI's death by the node's signal.
	Interrupted bool `json:"interrupted,omitempty"`
	// Abandoned: the turn was stopped with no one asking (moving, cut
	// off, stopping) and its prompt runs again (an IDLE report).
	Abandoned    bool           `json:"abandoned,omitempty"`
	FleetAccount string         `json:"fleet_account,omitempty"`
	Usage        []quota.Window `json:"usage,omitempty"`
	// Pending: not recorded by the control plane yet.
	Pending bool `json:"pending,omitempty"`
	// N numbers the reports, so a send that lands clears only its own.
	N int64 `json:"n"`
}

// reportTimeout bounds one attempt at a report.
const reportTimeout = 10 * time.Second

// report records the session's state at a turn's end (see reportEnd).
func (a *Daemon) report(ctx context.Context, sessionID string, o owned, st castv1.SessionState, reason string, exitCode int) {
	a.reportEnd(ctx, sessionID, o, st, reason, exitCode, fleetCred{}, nil)
}

// reportEnd records the session's state at a turn's end; it also carries
// what the fleet needs: the fleet account the turn ran on and the
// provider's usage windows it saw. The report is kept as pending in the
// node's state first and sent once here; one that does not land is sent
// again by the session's worker (flushReport) until it does.
func (a *Daemon) reportEnd(ctx context.Context, sessionID string, o owned, st castv1.SessionState, reason string, exitCode int, fc fleetCred, usage []quota.Window) {
	a.recordEnd(ctx, sessionID, turnReport{State: st, Reason: clipReason(reason), ExitCode: exitCode}, fc, usage)
}

// reportInterrupted records the end of a turn someone stopped (`cast
// interrupt`, a switch): idle, and interrupted rather than failed with
// the exit code the node's signal gave the CLI (143, -1).
func (a *Daemon) reportInterrupted(ctx context.Context, sessionID string, exitCode int, fc fleetCred, usage []quota.Window) {
	a.recordEnd(ctx, sessionID, turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, ExitCode: exitCode, Interrupted: true}, fc, usage)
}

// reportAbandoned records the end of a turn stopped with no one asking
// (the session moving, the node cut off or stopping): idle, its prompt to
// run again, not failed with the exit code the node's signal gave the CLI.
func (a *Daemon) reportAbandoned(ctx context.Context, sessionID string, exitCode int) {
	a.recordEnd(ctx, sessionID, turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, ExitCode: exitCode, Abandoned: true}, fleetCred{}, nil)
}

// recordEnd keeps r (with what the fleet needs) as the session's pending
// report and sends it once (see reportEnd).
func (a *Daemon) recordEnd(ctx context.Context, sessionID string, r turnReport, fc fleetCred, usage []quota.Window) {
	r.FleetAccount, r.Pending = fc.Account, true
	if fc.Account != "" {
		r.Usage = usage
	}
	to, rewound := a.takeRewind(sessionID)
	_ = a.st.session(sessionID, func(s *owned) {
		if rewound {
			rewind(s, to)
		}
		if s.Report != nil {
			r.N = s.Report.N + 1
		}
		s.Report = &r
	})
	if err := a.sendReport(ctx, sessionID, r); err != nil {
		a.lg.Warn("report turn state failed; it is sent again until it lands", zap.String("session", sessionID), zap.Error(err))
	}
}

// sendReport sends r and, once the control plane recorded it, marks it
// landed (unless a newer report replaced it meanwhile).
func (a *Daemon) sendReport(ctx context.Context, sessionID string, r turnReport) error {
	cur, ok := a.st.get(sessionID)
	if !ok {
		return nil
	}
	req := a.reportRequest(sessionID, cur, r)
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if _, err := a.cli.Nodes.ReportTurn(ctx, req); err != nil {
		return err
	}
	return a.settleReport(sessionID, r.N)
}

// sendBareReport sends r's state, reason and exit code with the delivery
// cursor, and without it if that is refused for good too: what is left
// when the control plane refused the whole report for good (its delivery
// cursor, fleet account or cwd is one the control plane does not take),
// so the session does not keep the state of a turn that ended. The cursor
// goes along where the control plane takes it: left out for a fleet
// account or cwd it refused, the store's cursor stayed behind the node's,
// and a later move ran again the messages this node had run.
func (a *Daemon) sendBareReport(ctx context.Context, sessionID string, r turnReport) error {
	cur, ok := a.st.get(sessionID)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	// The report as reportRequest builds it, without what was refused.
	r.FleetAccount, r.Usage = "", nil
	req := a.reportRequest(sessionID, cur, r)
	req.Cwd = ""
	_, err := a.cli.Nodes.ReportTurn(ctx, req)
	if err != nil && (req.DeliveredSeq != 0 || req.HeldSeq != 0) && refusedForGood(err) {
		// The cursor itself is refused (past the store's last seq: a store
		// restored from an older snapshot); the next assignment reconciles it.
		req.DeliveredSeq, req.HeldSeq = 0, 0
		_, err = a.cli.Nodes.ReportTurn(ctx, req)
	}
	return err
}

// settleReport marks report n no longer pending (unless a newer report
// replaced it meanwhile).
func (a *Daemon) settleReport(sessionID string, n int64) error {
	return a.st.session(sessionID, func(s *owned) {
		if s.Report != nil && s.Report.N == n {
			s.Report.Pending = false
		}
	})
}

// reportRequest is r as the control plane takes it, whatever the node
// saved: one it refuses is refused at every send, and the worker, which
// flushes it before each turn, would leave the session `running` and
// never run another. The reason is clipped again (a pending report an
// older node saved may hold a NUL); usage windows the control plane would
// refuse (a CLI's output read wrong after a format change) are left out.
func (a *Daemon) reportRequest(sessionID string, cur owned, r turnReport) *castv1.ReportTurnRequest {
	req := &castv1.ReportTurnRequest{SessionId: sessionID, Node: a.cfg.Name, OwnerToken: cur.Token, State: r.State,
		StateReason: clipReason(r.Reason), ExitCode: int32(r.ExitCode), DeliveredSeq: cur.DeliveredSeq, FleetAccount: r.FleetAccount,
		Cwd: sessionCwd(cur), Interrupted: r.Interrupted, Abandoned: r.Abandoned, HeldSeq: heldSeq(cur, r)}
	if r.FleetAccount != "" {
		var left int
		if req.Usage, left = wire.ReportableWindows(wire.WindowsToProto(r.Usage)); left > 0 {
			a.lg.Warn("usage windows the control plane would refuse left out of the turn report",
				zap.String("session", sessionID), zap.Int("windows", left))
		}
	}
	return req
}

// heldSeq is a FAILED or PARKED report's held seq: the messages through
// FailedSeq run with the next message (a parked turn's also with the next
// fleet credential), none before (the worker's gate), so the control
// plane sends no interrupt for them (moves.RunsNothing). Read at each
// send, as the delivery cursor: a switch or a credential that cleared
// FailedSeq meanwhile (they run now) reports none.
func heldSeq(cur owned, r turnReport) int64 {
	if !fence.Holds(r.State) || cur.FailedSeq <= cur.DeliveredSeq {
		return 0
	}
	return cur.FailedSeq
}

// flushReport sends the session's pending report until it lands, the
// session turns out to be owned elsewhere (false) or ctx ends. The worker
// calls it before each turn, so a turn's end is recorded before the next
// one starts, and after a node restart before anything else. A report
// refused for good (refusedForGood: the session purged, a request the
// control plane never takes) is dropped, logged and counted: sent again it
// is refused again, and would hold the session's next turn for ever.
func (a *Daemon) flushReport(ctx context.Context, sessionID string) bool {
	pauses := retry.Reconnect(a.cfg.ReconnectMin, a.cfg.ReconnectMax).Pauses()
	for ctx.Err() == nil {
		o, ok := a.st.get(sessionID)
		if !ok || o.Report == nil || !o.Report.Pending {
			return true
		}
		err := a.sendReport(ctx, sessionID, *o.Report)
		switch {
		case err == nil:
			a.lg.Info("turn state reported", zap.String("session", sessionID), zap.Stringer("state", o.Report.State))
			return true
		case client.ReasonOf(err) == "NOT_OWNER":
			return false
		case refusedForGood(err) && a.sendBareReport(ctx, sessionID, *o.Report) == nil:
			// The state alone landed: dropped whole, a turn whose start
			// was recorded left the session running with no process.
			a.lg.Warn("turn state report refused for good; its state reported alone", zap.String("session", sessionID),
				zap.Stringer("state", o.Report.State), zap.Error(err))
			if err = a.settleReport(sessionID, o.Report.N); err == nil {
				continue
			}
		case refusedForGood(err):
			a.m.ReportsDropped.Inc()
			a.lg.Warn("turn state report refused for good; dropped", zap.String("session", sessionID),
				zap.Stringer("state", o.Report.State), zap.Error(err))
			if err = a.settleReport(sessionID, o.Report.N); err == nil {
				continue // a newer report, if one came meanwhile, is sent
			}
		}
		wait := pauses.Next()
		a.lg.Warn("report turn state failed; trying again", zap.String("session", sessionID), zap.Error(err), zap.Duration("in", wait))
		tick.Sleep(ctx, wait)
	}
	return true
}

// reconcileState runs when the control plane (re)assigns a session: if it
// shows a turn running (or waiting on a permission) that this node is not
// running, the node's own last report is sent again (idle when there was
// none), so a report lost with a control plane stop cannot leave the
// session `running` until the next message.
func (a *Daemon) reconcileState(sessionID string, shown castv1.SessionState) {
	if shown != castv1.SessionState_SESSION_STATE_RUNNING && shown != castv1.SessionState_SESSION_STATE_WAITING_PERMISSION {
		return
	}
	if a.workers.running(sessionID) || a.st.behind() {
		return
	}
	_ = a.st.session(sessionID, func(s *owned) {
		if s.Report == nil {
			s.Report = &turnReport{State: castv1.SessionState_SESSION_STATE_IDLE}
		}
		s.Report.Pending = true
	})
	a.lg.Info("control plane shows a turn this node is not running; reporting its state again", zap.String("session", sessionID))
}
