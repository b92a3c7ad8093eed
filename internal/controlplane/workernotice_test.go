package controlplane_test

import (
	"context"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Each permission a worker's turn waits on is a wait its parent hears of
// once. Its notice was keyed by the worker's state and last seq: a second
// request in the same turn, with no message stored since the first, told
// the parent nothing, so it never learnt its worker waited again; and the
// same request asked again (`cast mcp` asks again when one call's wait
// runs out) after a message was stored told it twice.
func TestWorkerTellsItsParentOfEachPermissionWait(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	cmds := rawNode(t, c, "n1")
	waitConnected(t, c, "n1", true)
	ctx := ctxT(t)
	parent, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Text: "plan the work"})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", ParentId: parent.Id, Text: "do the work"})
	if err != nil {
		t.Fatal(err)
	}
	assign := nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetAssignSession().GetSession().GetId() == worker.Id })
	if _, err := c.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: worker.Id, Node: "n1",
		OwnerToken: assign.GetAssignSession().OwnerToken, State: castv1.SessionState_SESSION_STATE_RUNNING, DeliveredSeq: 1}); err != nil {
		t.Fatal(err)
	}

	// ask is the turn's CLI asking through `cast mcp`; it returns once
	// the call waits on a person (its notice stored before), with the
	// call's end and a stop that ends the call.
	ask := func(rid, tool string) (<-chan error, context.CancelFunc) {
		t.Helper()
		// A stopped call's handler may still count as waiting.
		testharness.WaitFor(t, 30*time.Second, "no call waiting", func() bool { return srv.PermissionsWaiting() == 0 })
		actx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Sessions.RequestPermission(actx, &castv1.RequestPermissionRequest{SessionId: worker.Id,
				RequestId: rid, ToolName: tool, Input: `{"file":"a.txt"}`})
			done <- err
		}()
		testharness.WaitFor(t, 30*time.Second, "the request "+rid+" waiting on a person", func() bool { return srv.PermissionsWaiting() == 1 })
		return done, stop
	}
	ended := func(done <-chan error) {
		t.Helper()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the permission call did not end")
		}
	}
	// heard is the tools the parent was told its worker waits on, in order.
	heard := func() []string {
		t.Helper()
		resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: parent.Id, StartSeq: 1})
		if err != nil {
			t.Fatal(err)
		}
		var tools []string
		for _, m := range resp.Messages {
			if _, rest, ok := strings.Cut(m.Text, "Worker "+worker.Id+" (Claude Code) waits on a permission: permission for "); ok {
				tools = append(tools, strings.Fields(rest)[0])
			}
		}
		return tools
	}

	first, stop := ask("r-read", "Read")
	defer stop()
	if _, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: worker.Id, RequestId: "r-read", Allow: true}); err != nil {
		t.Fatal(err)
	}
	ended(first)
	// The same turn asks again, for another tool: no message was stored
	// in the worker since the first request.
	second, stop := ask("r-write", "Write")
	if got := heard(); len(got) != 2 || got[0] != "Read" || got[1] != "Write" {
		t.Fatalf("the parent was told its worker waits on %q; want Read, then Write (each wait once)", got)
	}

	// The second call's wait runs out and `cast mcp` asks again with its
	// id, after someone sent the worker a message: the same wait.
	stop()
	ended(second)
	if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: worker.Id, Text: "also tidy up"}); err != nil {
		t.Fatal(err)
	}
	again, stop := ask("r-write", "Write")
	defer stop()
	if got := heard(); len(got) != 2 {
		t.Fatalf("after the request was asked again the parent was told its worker waits on %q; want Read and Write once each", got)
	}
	if _, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: worker.Id, RequestId: "r-write", Allow: true}); err != nil {
		t.Fatal(err)
	}
	ended(again)
}
