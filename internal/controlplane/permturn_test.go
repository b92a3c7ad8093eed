package controlplane_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A permission request lives as long as the turn that asked it. A turn
// that ended while its CLI waited on one (interrupted, killed, failed)
// left the request pending: `cast approve` without --request answered the
// oldest pending one, that dead request, said "approved", and set the
// session running while the next turn's CLI went on waiting on its own.
func TestApproveAnswersTheLiveTurnsRequestNotADeadTurns(t *testing.T) {
	t.Parallel()
	c, _, sess, token := rawOwned(t, "work")
	ctx := ctxT(t)
	report := func(st castv1.SessionState) {
		t.Helper()
		if _, err := c.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "n1", OwnerToken: token,
			State: st, DeliveredSeq: 1}); err != nil {
			t.Fatalf("report %v: %v", st, err)
		}
	}
	type answer struct {
		resp *castv1.RequestPermissionResponse
		err  error
	}
	// ask is the turn's CLI asking through `cast mcp`; stop ends that CLI.
	ask := func(rid, tool string) (<-chan answer, context.CancelFunc) {
		actx, stop := context.WithCancel(ctx)
		got := make(chan answer, 1)
		go func() {
			resp, err := c.Sessions.RequestPermission(actx, &castv1.RequestPermissionRequest{SessionId: sess.Id,
				RequestId: rid, ToolName: tool, Input: `{"command":"ls"}`})
			got <- answer{resp, err}
		}()
		testharness.WaitFor(t, 30*time.Second, "the session waiting on "+rid, func() bool {
			s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
			return err == nil && s.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION &&
				strings.HasPrefix(s.StateReason, "permission for "+tool+" ")
		})
		return got, stop
	}

	// The first turn asks, then dies (interrupted) before anyone answers.
	report(castv1.SessionState_SESSION_STATE_RUNNING)
	_, stopDead := ask("r-dead", "Bash")
	stopDead()
	report(castv1.SessionState_SESSION_STATE_IDLE)

	// The next turn asks for another tool; approving answers it.
	report(castv1.SessionState_SESSION_STATE_RUNNING)
	live, stopLive := ask("r-live", "Write")
	defer stopLive()
	resp, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sess.Id, Allow: true})
	if err != nil || resp.RequestId != "r-live" {
		t.Fatalf("approve = %v, %v; want the live turn's request r-live answered", resp, err)
	}
	select {
	case a := <-live:
		if a.err != nil || !a.resp.Allow {
			t.Fatalf("the live turn's request = %v, %v; want allowed", a.resp, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the live turn's request was not answered")
	}

	// Once that turn ended too, nothing is left to approve.
	report(castv1.SessionState_SESSION_STATE_IDLE)
	_, err = c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sess.Id, Allow: true})
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != "NO_PENDING_PERMISSION" {
		t.Fatalf("approve after the turn ended = %v; want FAILED_PRECONDITION NO_PENDING_PERMISSION", err)
	}
}
