package controlplane_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// rawNode connects a hand-driven node stream and returns a channel of the
// commands it receives (acking none of them).
func rawNode(t *testing.T, c *client.Client, name string) <-chan *castv1.Command {
	return commandsOf(connectNode(t, ctxT(t), c, name, nil))
}

// rawOwned starts a control plane and a hand-driven node n1 on it, then a
// session n1 owns whose first message is text: the client, the commands n1
// receives, the session and n1's owner token for it.
func rawOwned(t *testing.T, text string) (*client.Client, <-chan *castv1.Command, *castv1.Session, int64) {
	t.Helper()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	cmds := rawNode(t, c, "n1")
	waitConnected(t, c, "n1", true)
	sess, err := c.Sessions.CreateSession(ctxT(t), &castv1.CreateSessionRequest{Agent: "claude", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	assign := nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetAssignSession().GetSession().GetId() == sess.Id })
	return c, cmds, sess, assign.GetAssignSession().OwnerToken
}

// commandsOf is the commands n's stream carries, until it ends.
func commandsOf(n *nodeStream) <-chan *castv1.Command {
	cmds := make(chan *castv1.Command, 64)
	go func() {
		defer close(cmds)
		for {
			f, err := n.stream.Recv()
			if err != nil {
				return
			}
			if cmd := f.GetCommand(); cmd != nil {
				cmds <- cmd
			}
		}
	}()
	return cmds
}

func nextCommand(t *testing.T, cmds <-chan *castv1.Command, want func(*castv1.Command) bool) *castv1.Command {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case cmd, ok := <-cmds:
			if !ok {
				t.Fatal("node stream closed")
			}
			if want(cmd) {
				return cmd
			}
		case <-timeout:
			t.Fatal("command not received")
		}
	}
}

// Commands reach the owner through whichever replica holds its stream;
// ReportTurn is fenced by the owner token like appends.
func TestAssignInterruptAndReportTurnAcrossReplicas(t *testing.T) {
	t.Parallel()
	_, _, ca, cb := twoReplicas(t)
	cmds := rawNode(t, ca, "n1")
	waitConnected(t, cb, "n1", true)
	ctx := ctxT(t)
	// Its first message is a turn about to start: still IDLE, yet
	// something to stop.
	sess, err := cb.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Text: "work"})
	if err != nil {
		t.Fatal(err)
	}
	assign := nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetAssignSession().GetSession().GetId() == sess.Id })
	token := assign.GetAssignSession().OwnerToken

	resp, err := cb.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: sess.Id})
	if err != nil || !resp.Delivered || resp.Idle {
		t.Fatalf("interrupt: %v %v", resp, err)
	}
	nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetInterrupt().GetSessionId() == sess.Id })

	rt, err := cb.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "n1", OwnerToken: token,
		State: castv1.SessionState_SESSION_STATE_FAILED, StateReason: "codex: not logged in", DeliveredSeq: 1})
	if err != nil || rt.Session.State != castv1.SessionState_SESSION_STATE_FAILED || rt.Session.StateReason != "codex: not logged in" {
		t.Fatalf("report turn: %v %v", rt, err)
	}
	// The turn is over and nothing waits: nothing to stop, nothing sent.
	resp, err = cb.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: sess.Id})
	if err != nil || !resp.Idle || resp.Delivered {
		t.Fatalf("interrupt of a finished turn: %v %v", resp, err)
	}
	_, err = ca.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "n1", OwnerToken: token - 1,
		State: castv1.SessionState_SESSION_STATE_IDLE})
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != "NOT_OWNER" {
		t.Fatalf("stale report: %v", err)
	}
	got, _ := ca.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if got.State != castv1.SessionState_SESSION_STATE_FAILED {
		t.Fatalf("a stale report changed the state to %v", got.State)
	}
}

// A switch's interrupt names the agent it switched from, so the node stops
// only that agent's turn: reaching the node after that turn ended, it
// stopped the new agent's turn before it started (node
// TestSwitchInterruptStopsOnlyTheOldAgentsTurn). `cast interrupt` names
// none: it stops whatever turn runs.
func TestSwitchInterruptNamesTheOldAgent(t *testing.T) {
	t.Parallel()
	c, cmds, sess, token := rawOwned(t, "work")
	ctx := ctxT(t)
	if _, err := c.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "n1", OwnerToken: token,
		State: castv1.SessionState_SESSION_STATE_RUNNING, Agent: "claude"}); err != nil {
		t.Fatal(err)
	}
	interrupt := func() *castv1.Interrupt {
		return nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetInterrupt().GetSessionId() == sess.Id }).GetInterrupt()
	}
	if _, err := c.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: sess.Id}); err != nil {
		t.Fatal(err)
	}
	if in := interrupt(); in.Agent != "" || in.Abandon {
		t.Fatalf("cast interrupt sent %v; want one naming no agent", in)
	}
	if _, err := c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	if in := interrupt(); in.Agent != "claude" || in.Abandon {
		t.Fatalf("the switch sent %v; want one naming claude, the agent it switched from", in)
	}
}
