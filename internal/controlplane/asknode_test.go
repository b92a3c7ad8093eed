package controlplane_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// silentNode starts a control plane over an external etcd and registers a
// node there, with the claude CLI, that is connected but never answers:
// the test answers for it, or not, through st.
func silentNode(t *testing.T) (*controlplane.Server, *store.Store, string) {
	ep := testharness.StartEtcd(t, nil)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.EtcdEndpoints, c.DataDir = []string{ep}, "" })
	st := testharness.OpenStore(t, ep, nil)
	n := &castv1.Node{Name: "mute", Agents: []*castv1.AgentInstall{{Name: "claude"}}}
	if _, err := st.RegisterNode(ctxT(t), n, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return srv, st, ep
}

// answerUndecodably answers every question put to the node mute, until
// the test ends, with bytes that are no ReportWorkspaceRequest.
func answerUndecodably(t *testing.T, st *store.Store) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() {
		_ = st.WatchDispatch(ctx, 0, func(c store.Change) {
			if c.NodeCmd != nil && c.Node == "mute" {
				_ = st.PutWorkspaceAnswer(ctx, "mute", c.NodeCmd.Id, []byte{0xff})
			}
		})
	}()
}

// A node's answer that does not decode is named in `cast worktree ls`'s
// unanswered list by a stable message: the list carried the raw decode
// error. The raw error goes to the control plane's log.
func TestUnansweredWorktreeListHidesRawErrors(t *testing.T) {
	srv, st, _ := silentNode(t)
	ctx := ctxT(t)
	answerUndecodably(t, st)
	resp, err := testharness.Dial(t, srv.Addr()).Nodes.ListWorktrees(ctx, &castv1.ListWorktreesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := "mute: internal error: decode a node's workspace answer"
	if len(resp.Unanswered) != 1 || resp.Unanswered[0] != want {
		t.Fatalf("unanswered = %q, want [%q]", resp.Unanswered, want)
	}
	if testharness.ControlPlaneLogs(t, srv).FilterMessage("internal error").FilterField(zap.String("node", "mute")).Len() == 0 {
		t.Error("the raw decode error was not logged")
	}
}

// A node whose answer to placement's question (has it the caller's
// folder?) does not decode is named in the refusal by a stable message:
// the refusal carried the raw decode error, with --node and without. The
// raw error goes to the control plane's log.
func TestPlacementRefusalHidesRawErrors(t *testing.T) {
	srv, st, _ := silentNode(t)
	answerUndecodably(t, st)
	c := testharness.Dial(t, srv.Addr())
	for _, node := range []string{"mute", ""} {
		t.Run("node="+node, func(t *testing.T) {
			_, err := c.Sessions.CreateSession(ctxT(t), &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/u/app", CwdOnCaller: true, Node: node})
			msg := status.Convert(err).Message()
			want := "node mute: internal error: decode a node's workspace answer;"
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(msg, want) || strings.Contains(msg, "proto") {
				t.Fatalf("err = %v; want FAILED_PRECONDITION naming mute's answer as %q, no decoder's text", err, want)
			}
		})
	}
	if testharness.ControlPlaneLogs(t, srv).FilterMessage("internal error").FilterField(zap.String("node", "mute")).Len() == 0 {
		t.Error("the raw decode error was not logged")
	}
}

// A node that has not answered is said to have run out the wait that ran
// out: the control plane's own (askNodeWithin's wait), or the caller's
// sooner deadline, which was reported as the control plane's wait.
func TestNodeNotAnsweringNamesTheDeadlineThatRanOut(t *testing.T) {
	srv, _, _ := silentNode(t)
	tests := []struct {
		name     string
		deadline time.Duration // the caller's
		wait     time.Duration // the control plane's
		want     string
		not      string
	}{
		{"the control plane's wait", time.Minute, 200 * time.Millisecond, "did not answer within 200ms", "deadline"},
		{"the caller's deadline", 200 * time.Millisecond, time.Minute, "the request's deadline ran out", "within 1m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			err := srv.AskNodeWithin(ctx, "mute", tc.wait)
			e, ok := errs.As(err)
			if !ok || e.Reason != errs.ReasonUnavailable || !strings.Contains(e.Msg, tc.want) || strings.Contains(e.Msg, tc.not) {
				t.Fatalf("err = %v; want UNAVAILABLE saying %q", err, tc.want)
			}
		})
	}
}

// The dispatcher forgets a purged session's owner: it kept every purged
// session's until its watch restarted, its watch ignoring deletions. A
// session made after the purge, once the dispatcher knows its owner,
// shows the dispatcher has seen the purge (one watch, in revision order).
func TestDispatcherForgetsPurgedSessions(t *testing.T) {
	srv, st, _ := silentNode(t)
	ctx := ctxT(t)
	create := func() string {
		c, err := st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Node: "mute", Creator: "user:test"})
		if err != nil {
			t.Fatal(err)
		}
		id := c.Session.Id
		testharness.WaitFor(t, 30*time.Second, "the dispatcher to know "+id+"'s owner", func() bool {
			_, ok := srv.DispatchOwner(id)
			return ok
		})
		return id
	}
	purged := create()
	if err := st.PurgeSession(ctx, purged, func(*castv1.Session) error { return nil }); err != nil {
		t.Fatal(err)
	}
	create()
	if node, ok := srv.DispatchOwner(purged); ok {
		t.Fatalf("the dispatcher still keeps purged session %s's owner %s", purged, node)
	}
}

// cast_sessions counts every session once when the store compacts past
// its listing's revision midway: the count failed (INVALID_PAGE_TOKEN)
// and so was never set on a store too big to list within the retained
// history. It goes on after the last session counted.
func TestSessionCountResumesAfterCompaction(t *testing.T) {
	srv, st, ep := silentNode(t)
	ctx := ctxT(t)
	ids := testharness.Sessions(t, st, "mute", 5)
	cs := testharness.NewCompactingStore(t, ep, st, 2)
	if err := srv.CountSessionsIn(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if n := srv.SessionsCounted(); !cs.Compacted || !slices.Equal(cs.Listed, ids) || n != float64(len(ids)) {
		t.Fatalf("compacted %v, listed %v, counted %v; want each of %v listed and counted once", cs.Compacted, cs.Listed, n, ids)
	}
}
