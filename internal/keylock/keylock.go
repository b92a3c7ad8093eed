// Package keylock is a mutex per key (a project folder, a worktree's
// path) whose Lock gives up when its context ends.
package keylock

import (
	"context"
	"sync"
)

// Locks holds one mutex per key; the zero value is ready.
type Locks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the key is unlocked
}

// Lock waits for key, or for ctx; unlock releases it.
func (k *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		unlock, done := k.try(key)
		if unlock != nil {
			return unlock, nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryLock takes key if no one holds it.
func (k *Locks) TryLock(key string) (unlock func(), ok bool) {
	unlock, _ = k.try(key)
	return unlock, unlock != nil
}

// try takes key, or returns the channel closed when its holder unlocks it.
func (k *Locks) try(key string) (unlock func(), held <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if done, busy := k.held[key]; busy {
		return nil, done
	}
	if k.held == nil {
		k.held = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	k.held[key] = done
	return func() {
		k.mu.Lock()
		delete(k.held, key)
		k.mu.Unlock()
		close(done)
	}, nil
}
