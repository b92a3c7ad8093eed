package controlplane_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// answerWorkspaces answers the workspace requests n's stream brings as a
// node holding wt does (a removal answers with it too); every other frame
// it reads and leaves, as a node that has not acted on it yet.
func answerWorkspaces(t *testing.T, ctx context.Context, c *client.Client, n *nodeStream, name string, wt *castv1.Worktree) {
	go func() {
		for {
			f, err := n.stream.Recv()
			if err != nil {
				return
			}
			ws := f.GetCommand().GetWorkspace()
			if ws == nil {
				continue
			}
			ans := &castv1.ReportWorkspaceRequest{Node: name, RequestId: ws.RequestId, Worktrees: []*castv1.Worktree{wt}}
			if _, err := c.Nodes.ReportWorkspace(ctx, ans); err != nil && ctx.Err() == nil {
				t.Errorf("workspace answer: %v", err)
			}
		}
	}()
}

// A worktree that holds a user's session and one purged since (its node
// has not dropped it yet: the release reached another replica, or the
// node was away) is the user's to list and remove: the purged session is
// nobody's. It was hidden from `cast worktree ls` and its removal refused
// NOT_FOUND, the user's own worktree stuck until the node reconnected.
// Another user still may not touch it.
func TestPurgedSessionDoesNotHoldItsWorktree(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	srv := testharness.StartControlPlane(t, nil)
	admin := testharness.Dial(t, srv.Addr())
	users := map[string]*client.Client{}
	for _, name := range []string{"alice", "bob"} {
		tok, err := admin.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: name, Role: castv1.Role_ROLE_USER})
		if err != nil {
			t.Fatal(err)
		}
		users[name] = testharness.DialAs(t, srv.Addr(), tok.Token)
	}
	n := connectNode(t, ctx, admin, "n", nil)
	waitConnected(t, admin, "n", true)
	var sessions []string
	for range 2 {
		s, err := users["alice"].Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n"})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s.Id)
	}
	wt := &castv1.Worktree{Node: "n", Path: "/tmp/wt", Branch: "b", Checkout: "/tmp", Sessions: sessions}
	answerWorkspaces(t, ctx, admin, n, "n", wt)
	if _, err := users["alice"].Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: sessions[1], Purge: true}); err != nil {
		t.Fatal(err)
	}

	ls, err := users["alice"].Nodes.ListWorktrees(ctx, &castv1.ListWorktreesRequest{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Worktrees) != 1 {
		t.Errorf("alice lists %d worktrees, want her one (with a purged session)", len(ls.Worktrees))
	}
	if _, err := users["bob"].Nodes.RemoveWorktree(ctx, &castv1.RemoveWorktreeRequest{Node: "n", Path: wt.Path}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("bob removes alice's worktree: %v, want PERMISSION_DENIED", err)
	}
	if _, err := users["alice"].Nodes.RemoveWorktree(ctx, &castv1.RemoveWorktreeRequest{Node: "n", Path: wt.Path}); err != nil {
		t.Errorf("alice removes her worktree holding a purged session: %v", err)
	}
}
