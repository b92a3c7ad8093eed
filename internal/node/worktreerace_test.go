package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Two sessions on one worktree branch whose first turns start together
// (`cast spawn` of a worker before its parent's first turn in a new
// worktree ran: moves.BranchBeside gives the worker the parent's branch)
// both found no worktree and both ran `git worktree add`: one failed
// ("already exists") and its turn was not set up. One makes it now, the
// other waits and takes it; both turns run there, and one worktree is
// recorded (and set up once). The failpoints hold the first maker just
// before `git worktree add` until the second gets as far as it can: to
// its own `git worktree add` (no lock), or to waiting for the first.
func TestFirstTurnsOnOneBranchShareItsWorktree(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p := rerunDaemon(t, fm)
	repo := newRepo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		mu     sync.Mutex
		makers int
		second = make(chan struct{})
		once   sync.Once
	)
	arrived := func() { once.Do(func() { close(second) }) }
	a.cfg.Failpoint = func(name string) {
		switch name {
		case "node.worktree-add":
			mu.Lock()
			makers++
			first := makers == 1
			mu.Unlock()
			if !first {
				arrived()
				return
			}
			select {
			case <-second:
			case <-ctx.Done():
			}
		case "node.worktree-busy":
			arrived()
		}
	}
	ids := []string{"parent", "worker"}
	for _, id := range ids {
		_ = p.add(id, &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hello from " + id, ClientId: "u-" + id})
		if err := a.st.assign(id, func(o *owned) {
			o.Token, o.Agent, o.Cwd, o.WorktreeBranch = 1, "claude", repo, "feat/x"
			o.ReceivedSeq = 1
		}); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, len(ids))
	for _, id := range ids {
		o, _ := a.st.get(id)
		go func() { errc <- a.runTurn(ctx, id, o) }()
	}
	for range ids {
		if err := <-errc; err != nil {
			t.Errorf("a first turn on the shared branch: %v", err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	parent, _ := a.st.get("parent")
	worker, _ := a.st.get("worker")
	if parent.Cwd == repo || parent.Cwd != worker.Cwd || runGit(t, parent.Cwd, "rev-parse", "--abbrev-ref", "HEAD") != "feat/x" {
		t.Fatalf("turns ran in %s and %s, want one worktree on feat/x", parent.Cwd, worker.Cwd)
	}
	if parent.DeliveredSeq != 1 || worker.DeliveredSeq != 1 {
		t.Fatalf("delivered seqs %d and %d, want both 1", parent.DeliveredSeq, worker.DeliveredSeq)
	}
	if recs, _ := a.st.worktrees(); len(recs) != 1 {
		t.Fatalf("recorded worktrees %v, want the one made", recs)
	}
}
