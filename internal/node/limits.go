package node

import (
	"context"
	"errors"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/runner"
)

// The limits hook: a fleet turn reports the provider's usage windows it
// saw (the fleet decides on them: the end report carries them), and a turn
// that hit a usage limit is parked, not failed, and names its fleet
// account, so the control plane can switch the fleet away from it.

// limitsRunning has fleet turns ask the CLI for usage windows.
func (t *turn) limitsRunning() {
	t.rt.ReportUsage = t.fc.Account != ""
}

// limitsEnded claims a turn the runner ended on a usage limit.
func (t *turn) limitsEnded() (outcome, bool) {
	rerr := t.runnerErr()
	return outParked, rerr != nil && rerr.Reason == runner.ReasonRateLimited
}

// park settles a parked turn: nothing is marked as seen.
func (t *turn) park(ctx context.Context) error {
	return t.a.parkTurn(ctx, t.id, t.o, t.o.Agent+": "+t.runErr.Error(), t.res.ExitCode, t.fc, t.res.Usage)
}

// parkTurn is failTurn for a usage limit: the session shows parked, and
// the report names the fleet account the turn ran on so the control plane
// can switch the fleet away from it. If the shared credential store was
// rewritten while the turn ran (checked under the state lock, against
// setCredential), the turn runs again at once instead.
func (a *Daemon) parkTurn(ctx context.Context, sessionID string, o owned, reason string, exitCode int, fc fleetCred, usage []quota.Window) error {
	// Parked prompts are kept: a new fleet credential runs them again.
	a.markFailed(sessionID, o, failHeld)
	a.report(ctx, sessionID, o, castv1.SessionState_SESSION_STATE_FAILED, reason, exitCode)
	err := errors.New(reason)
	again := false
	_ = a.st.session(sessionID, func(s *owned) {
		if fc.Account != "" && a.st.Fleet[o.Agent].Epoch > fc.Epoch {
			s.FailedSeq, again = 0, true
			return
		}
		s.Parked = true
	})
	if again {
		a.lg.Info("usage limit on a credential replaced meanwhile; running the turn again", zap.String("session", sessionID))
		a.wake(sessionID)
		return err
	}
	a.reportEnd(ctx, sessionID, o, castv1.SessionState_SESSION_STATE_PARKED, reason, exitCode, fc, usage)
	return err
}
