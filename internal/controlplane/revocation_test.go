package controlplane_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A revocation written through replica A ends the revoked principal's
// open calls on replica B within a second, UNAUTHENTICATED, and no one
// else's: a user's WatchSession when its token is deleted; a node's
// Connect stream (sending no heartbeats, so nothing re-checks it) and its
// RequestPermission long poll when its credential is revoked. Two
// replicas on one etcd, real gRPC streams.
func TestRevocationEndsOpenCallsOnEveryReplica(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	external := func(c *controlplane.Config) { c.EtcdEndpoints = []string{ep}; c.DataDir = "" }
	a := testharness.StartControlPlane(t, external)
	b := testharness.StartControlPlane(t, external)
	ctx := ctxT(t)
	adminA := testharness.Dial(t, a.Addr())
	alice, err := adminA.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "alice", Role: castv1.Role_ROLE_USER})
	must(t, err)
	aliceB := testharness.DialAs(t, b.Addr(), alice.Token)
	join, err := adminA.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	must(t, err)
	joined, err := testharness.DialAs(t, a.Addr(), "").Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "raw1", JoinToken: join.Token})
	must(t, err)
	nodeB := testharness.DialAs(t, b.Addr(), joined.Credential)

	connect := openConnect(t, ctx, nodeB, "raw1")
	sess, err := aliceB.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "raw1", Cwd: "/tmp"})
	must(t, err)
	watch := openWatch(t, ctx, aliceB, sess.Id)
	permission := make(chan error, 1)
	go func() {
		_, err := nodeB.Sessions.RequestPermission(ctx, &castv1.RequestPermissionRequest{SessionId: sess.Id, RequestId: "p1", ToolName: "Bash", Input: "ls"})
		permission <- err
	}()
	testharness.WaitFor(t, 20*time.Second, "the permission request is pending", func() bool {
		s, err := adminA.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && s.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION
	})

	for _, step := range []struct {
		name   string
		revoke func() error
		ends   map[string]chan error
		stays  map[string]chan error
	}{
		{"cast token rm alice", func() error {
			_, err := adminA.Auth.DeleteToken(ctx, &castv1.DeleteTokenRequest{Name: "alice"})
			return err
		}, map[string]chan error{"alice's WatchSession": watch}, map[string]chan error{"raw1's Connect": connect, "raw1's RequestPermission": permission}},
		{"cast node rm raw1", func() error {
			_, err := adminA.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: "raw1"})
			return err
		}, map[string]chan error{"raw1's Connect": connect, "raw1's RequestPermission": permission}, nil},
	} {
		must(t, step.revoke())
		deadline := time.After(time.Second)
		for what, ended := range step.ends {
			select {
			case err := <-ended:
				if status.Code(err) != codes.Unauthenticated {
					t.Errorf("after %s, %s on the other replica ended with %v, want UNAUTHENTICATED", step.name, what, err)
				}
			case <-deadline:
				t.Fatalf("%s on the other replica was still open a second after %s", what, step.name)
			}
		}
		for what, open := range step.stays {
			select {
			case err := <-open:
				t.Fatalf("%s ended (%v) after %s, which did not revoke it", what, err, step.name)
			default:
			}
		}
	}
}

// openConnect opens name's Connect stream on c and waits for its welcome;
// the channel gets the error that ends it. It sends no heartbeats.
func openConnect(t *testing.T, ctx context.Context, c *client.Client, name string) chan error {
	t.Helper()
	stream, err := c.Nodes.Connect(ctx)
	must(t, err)
	hello := &castv1.Hello{Node: &castv1.Node{Name: name, Agents: []*castv1.AgentInstall{{Name: "claude"}}}}
	must(t, stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}))
	f, err := stream.Recv()
	if err != nil || f.GetWelcome() == nil {
		t.Fatalf("connect %s: %v %v", name, f, err)
	}
	return drain(func() error { _, err := stream.Recv(); return err })
}

// openWatch opens a WatchSession of id on c and waits for its first event.
func openWatch(t *testing.T, ctx context.Context, c *client.Client, id string) chan error {
	t.Helper()
	stream, err := c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: id})
	must(t, err)
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("watch %s: %v", id, err)
	}
	return drain(func() error { _, err := stream.Recv(); return err })
}

// drain calls recv until it fails and sends that error.
func drain(recv func() error) chan error {
	ended := make(chan error, 1)
	go func() {
		for {
			if err := recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	return ended
}
