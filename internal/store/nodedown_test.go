package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The turns a down node leaves shown (running, waiting on a permission)
// are marked failed with the reason, and nothing else is: a session with
// no turn keeps its state, a node that is back keeps its turns, and a node
// back later overwrites the failure with its own report (its owner token
// still holds).
func TestFailTurnsOfDownNode(t *testing.T) {
	const reason = "node n1 stopped answering"
	running, waiting, idle := castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, castv1.SessionState_SESSION_STATE_IDLE
	failed := castv1.SessionState_SESSION_STATE_FAILED
	tests := []struct {
		name  string
		state castv1.SessionState
		down  bool
		want  castv1.SessionState
	}{
		{"running on a down node", running, true, failed},
		{"waiting on a permission on a down node", waiting, true, failed},
		{"idle on a down node", idle, true, idle},
		{"running on a node that is up", running, false, running},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
			ctx := ctxT(t)
			lease, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			g := fence.Guard{Node: "n1", Token: c.Token}
			if _, err := s.SetState(ctx, c.Session.Id, g, fence.TurnState{State: tc.state}); err != nil {
				t.Fatal(err)
			}
			if tc.down {
				if err := s.UnregisterNode(ctx, lease); err != nil {
					t.Fatal(err)
				}
			}
			marked, err := s.FailTurnsOfDownNode(ctx, "n1", 0, reason)
			if err != nil {
				t.Fatal(err)
			}
			sess, err := s.GetSession(ctx, c.Session.Id)
			if err != nil {
				t.Fatal(err)
			}
			if sess.State != tc.want || (tc.want == failed) != (len(marked) == 1) {
				t.Fatalf("state %v (%d marked), want %v", sess.State, len(marked), tc.want)
			}
			if tc.want != failed {
				return
			}
			if sess.StateReason != reason {
				t.Fatalf("reason %q, want %q", sess.StateReason, reason)
			}
			// The node is back and reports its turn running again.
			if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if sess, err = s.SetState(ctx, c.Session.Id, g, fence.TurnState{State: running}); err != nil || sess.State != running {
				t.Fatalf("the node's report after it came back: %v, %v", sess.GetState(), err)
			}
			if marked, err := s.FailTurnsOfDownNode(ctx, "n1", 0, reason); err != nil || len(marked) != 0 {
				t.Fatalf("a node that is back had %d turns marked failed (%v)", len(marked), err)
			}
		})
	}
}

// A node whose stream ended twice in a row (a certificate renewal, then
// another) is judged by its latest going down: the check of the first,
// made when its grace ends, finds the node down again but back in between,
// and leaves the turn; the check of the second marks it failed.
func TestFailTurnsOfDownNodeJudgesTheLatestDown(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	downs := make(chan int64, 4)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.WatchNodesDown(wctx, func(_ string, rev int64) { downs <- rev })
	goDown := func(l fence.Lease) int64 {
		t.Helper()
		if err := s.UnregisterNode(ctx, l); err != nil {
			t.Fatal(err)
		}
		select {
		case rev := <-downs:
			return rev
		case <-ctx.Done():
			t.Fatal("no down event")
			return 0
		}
	}
	register := func() fence.Lease {
		t.Helper()
		l, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := register()
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetState(ctx, c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING}); err != nil {
		t.Fatal(err)
	}
	rev1 := goDown(first)
	rev2 := goDown(register())
	tests := []struct {
		name    string
		downRev int64
		marked  int
	}{
		{"the first going down, the node back since", rev1, 0},
		{"the latest going down", rev2, 1},
	}
	for _, tc := range tests {
		marked, err := s.FailTurnsOfDownNode(ctx, "n1", tc.downRev, "node n1 stopped answering")
		if err != nil || len(marked) != tc.marked {
			t.Fatalf("%s: %d marked (%v), want %d", tc.name, len(marked), err, tc.marked)
		}
	}
}
