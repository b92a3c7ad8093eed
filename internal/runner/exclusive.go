package runner

import (
	"context"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/keylock"
)

// projects serialises the turns of agents.ProjectExclusive drivers that
// share a project folder, across every Runner in the process (a node may
// hold several).
var projects keylock.Locks

// exclusive takes the project lock a turn of p's driver needs, if any:
// release is a no-op for other drivers.
func (p *plan) exclusive(ctx context.Context) (release func(), err error) {
	pe, ok := p.d.ad.(agents.ProjectExclusive)
	if !ok {
		return func() {}, nil
	}
	release, err = projects.Lock(ctx, pe.ProjectKey(p.d.home, p.t.Cwd))
	if err != nil {
		p.d.logf("runner: %s: interrupted while another session's turn ran in %s", p.a.Name, p.t.Cwd)
		return nil, &Error{Reason: ReasonInterrupted}
	}
	return release, nil
}
