// Package turnstate takes a node's report of a turn (ReportTurn): it stores
// the session's new state, fenced by the owner's token, and then tells the
// observers that act on it: the fleet (reservations, usage windows, limits)
// and moves (a worker's parent hears how its worker did). The handler is
// one call to Report; what happens after the state is stored lives with
// each observer.
package turnstate

import (
	"context"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Report is what a node says of a session's turn.
type Report struct {
	SessionID string
	Guard     fence.Guard // the owner's fence: node and owner token
	State     fence.TurnState
	// FleetAccount is the fleet account the agent's shared store held
	// when the turn ran ("" when none).
	FleetAccount string
	Usage        []*castv1.UsageWindow // the provider's usage windows the turn saw
}

// Store is what a report needs of the store.
type Store interface {
	SetState(ctx context.Context, sessionID string, g fence.Guard, t fence.TurnState) (*castv1.Session, error)
}

// Observer acts on a stored report. Its error is logged: the state is
// stored either way, and each observer retries on its own terms (the
// fleet's sweep, the parent's next report).
//
// An observer hears a report again when the node resends it (its send
// timed out, a slow observer say), so it must act as if it heard it once.
// Report does not skip a resend: the first send's observers ran under
// the request's context and may have stopped half way, and the resend is
// what finishes them.
type Observer interface {
	TurnReported(ctx context.Context, sess *castv1.Session, r Report) error
}

// Named is an Observer with the name its failures are logged under.
type Named struct {
	Name string
	Observer
}

// Reporter stores reports and tells the observers, in order.
type Reporter struct {
	st        Store
	observers []Named
	lg        *zap.Logger
}

// New returns a Reporter over st telling observers in their order.
func New(st Store, lg *zap.Logger, observers ...Named) *Reporter {
	return &Reporter{st: st, observers: observers, lg: lg}
}

// Report stores r's state and tells every observer; it returns the
// session as stored, or the store's error (a lost fence, say), when no
// observer hears of it.
func (rp *Reporter) Report(ctx context.Context, r Report) (*castv1.Session, error) {
	sess, err := rp.st.SetState(ctx, r.SessionID, r.Guard, r.State)
	if err != nil {
		return nil, err
	}
	for _, o := range rp.observers {
		if err := o.TurnReported(ctx, sess, r); err != nil {
			rp.lg.Warn("turn report observer failed", zap.String("observer", o.Name), zap.String("session", sess.Id), zap.Error(err))
		}
	}
	return sess, nil
}
