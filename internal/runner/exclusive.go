package runner

import (
	"context"
	"sync"

	"github.com/cast-dev/cast/internal/agents"
)

// projects serialises the turns of agents.ProjectExclusive drivers that
// share a project folder, across every Runner in the process (a node may
// hold several).
var projects = &keyedLock{held: map[string]chan struct{}{}}

// keyedLock is a mutex per key whose Lock gives up when ctx ends.
type keyedLock struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the key is unlocked
}

// Lock waits for key, or for ctx; unlock releases it.
func (k *keyedLock) Lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		k.mu.Lock()
		done, busy := k.held[key]
		if !busy {
			done = make(chan struct{})
			k.held[key] = done
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(done)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

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
