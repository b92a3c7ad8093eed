package fleet

import (
	"context"
	"errors"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/turnstate"
)

// TurnReported is the fleet's part of a node's turn report: the
// reservation ledger (a turn starting on a fleet account reserves, any
// other state frees), the usage windows the turn saw, and a limit the turn
// parked on. Each part runs even when another failed.
func (mg *Manager) TurnReported(ctx context.Context, sess *castv1.Session, r turnstate.Report) error {
	running := r.State.State == castv1.SessionState_SESSION_STATE_RUNNING
	var errs []error
	switch {
	case running && r.FleetAccount != "":
		errs = append(errs, mg.OnStart(ctx, sess.Id, sess.Agent, r.FleetAccount))
	case !running:
		errs = append(errs, mg.OnEnd(ctx, sess.Id, sess.Agent))
	}
	if len(r.Usage) > 0 && r.FleetAccount != "" {
		errs = append(errs, mg.OnUsage(ctx, sess.Id, sess.Agent, r.FleetAccount, r.Usage))
	}
	if r.State.State == castv1.SessionState_SESSION_STATE_PARKED && r.FleetAccount != "" {
		// The session is parked either way; a failed switch is retried by
		// the sweep (the account is limited and still active).
		errs = append(errs, mg.OnParked(ctx, sess.Id, sess.Agent, r.FleetAccount))
	}
	return errors.Join(errs...)
}
