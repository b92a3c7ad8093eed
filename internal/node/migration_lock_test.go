package node

import (
	"sync"
	"testing"
)

// lockPath's per-checkout locks were kept for good, one per checkout a
// session was ever imported into. A lock goes once no import holds or
// waits for it, and still serializes imports into one checkout.
func TestImportPathLocksGoWhenUnused(t *testing.T) {
	var j migrationJobs
	unlock := j.lockPath("/w/a")
	entered := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		u := j.lockPath("/w/a") // waits for the first holder
		close(entered)
		u()
	}()
	j.lockPath("/w/b")()
	select {
	case <-entered:
		t.Fatal("a second import entered a checkout another holds")
	default:
	}
	unlock()
	<-released
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); j.lockPath("/w/c")() }()
	}
	wg.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.paths) != 0 {
		t.Errorf("%d checkout locks kept after every import ended: %v", len(j.paths), j.paths)
	}
}
