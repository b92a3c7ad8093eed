package store_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A workspace move is the owner's to record (a stale token or another node
// is NOT_OWNER); a migration drops the checkout, a path on the source
// node; a node's answer reaches a waiter that started before it was stored.
func TestSetWorkspace(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	w := store.Workspace{Cwd: "/wt/feat", WorktreeBranch: "feat", Checkout: "/src/app"}
	for _, g := range []fence.Guard{{Node: "n2", Token: c.Token}, {Node: "n1", Token: c.Token - 1}} {
		if _, err := s.SetWorkspace(ctx, c.Session.Id, g, w); !errs.HasReason(err, errs.ReasonNotOwner) {
			t.Fatalf("guard %+v: %v, want NOT_OWNER", g, err)
		}
	}
	sess, err := s.SetWorkspace(ctx, c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}, w)
	if err != nil || sess.Cwd != w.Cwd || sess.WorktreeBranch != w.WorktreeBranch || sess.Checkout != w.Checkout {
		t.Fatalf("set: %v %v", sess, err)
	}
	handover(t, s, c.Session.Id, "n1", c.Token, "n2")
	if got, err := s.GetSession(ctx, c.Session.Id); err != nil || got.Checkout != "" || got.Cwd != w.Cwd {
		t.Fatalf("after a migration: %v %v", got, err)
	}

	got := make(chan []byte, 1)
	go func() {
		b, err := s.WaitWorkspaceAnswer(ctx, "n2", "req1")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	if err := s.PutWorkspaceAnswer(ctx, "n1", "req1", []byte("other node")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWorkspaceAnswer(ctx, "n2", "req1", []byte("answer")); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "answer" {
		t.Fatalf("waiter got %q", b)
	}
}
