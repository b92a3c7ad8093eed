package controlplane_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node over its own limits (bytes appended for the sessions it owns,
// open streams, request rate) gets RESOURCE_EXHAUSTED with a reason,
// through the real gRPC server with its own credential; another node and
// the admin are not held back by it.
func TestNodeLimits(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.NodeLimits = authz.Limits{Rate: 0.001, Burst: 8, Streams: 1, AppendBytes: 1, AppendBurst: 1 << 20}
		c.Store.MaxMessageBytes, c.MaxRecvBytes = 1<<20, 1<<20
	})
	admin := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	join, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60, Uses: 2})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*client.Client{}
	for _, n := range []string{"a", "b"} {
		resp, err := testharness.DialAs(t, srv.Addr(), "").Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: n, JoinToken: join.Token})
		if err != nil {
			t.Fatal(err)
		}
		nodes[n] = testharness.DialAs(t, srv.Addr(), resp.Credential)
	}
	a, b := nodes["a"], nodes["b"]
	cmds := rawNode(t, a, "a") // a's one stream
	waitConnected(t, admin, "a", true)
	sess, err := admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	token := nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetAssignSession().GetSession().GetId() == sess.Id }).
		GetAssignSession().OwnerToken

	appendBig := func(id string) error {
		_, err := a.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sess.Id, Node: "a", OwnerToken: token,
			Messages: []*castv1.Message{{ClientId: id, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: strings.Repeat("x", 600<<10)}}})
		return err
	}
	if err := appendBig("big-1"); err != nil {
		t.Fatalf("a's first 600 KiB: %v", err)
	}
	wantDenied(t, "a's second 600 KiB in a second", appendBig("big-2"), codes.ResourceExhausted, authz.ReasonAppendLimited)

	second, err := a.Nodes.Connect(ctx)
	if err == nil {
		_ = second.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: &castv1.Hello{Node: &castv1.Node{Name: "a"}}}})
		_, err = second.Recv()
	}
	wantDenied(t, "a's second stream", err, codes.ResourceExhausted, authz.ReasonTooManyStreams)

	var last error
	for range 9 { // more than the burst, whatever a spent above
		_, last = a.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
	}
	wantDenied(t, "a over its rate", last, codes.ResourceExhausted, authz.ReasonRateLimited)

	rawNode(t, b, "b") // b's own stream
	waitConnected(t, admin, "b", true)
	if _, err := b.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{}); err != nil {
		t.Errorf("b pays for a: %v", err)
	}
	got, err := admin.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got.Messages {
		ids = append(ids, m.ClientId)
	}
	if strings.Join(ids, ",") != "big-1" {
		t.Errorf("stored %v, want only the acknowledged big-1", ids)
	}
}

// tightPeerLimits: 200 calls outrun them unless each takes over ~0.9 s
// (the defaults were outrun only by a machine making over ~25 calls a
// second, which a loaded CI machine was not).
func tightPeerLimits(c *controlplane.Config) { c.PeerLimits = authz.Limits{Rate: 1, Burst: 10} }

// Calls without a credential (JoinNode, each an etcd read) are held to a
// rate per peer address, as users' and nodes' calls are per principal: a
// flood of joins with made-up tokens is refused RESOURCE_EXHAUSTED
// RATE_LIMITED instead of reaching the store at will; a credentialed
// caller from the same address is not held by it.
func TestAnonymousCallsAreRateLimitedPerPeer(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, tightPeerLimits)
	ctx := ctxT(t)
	anon := testharness.DialAs(t, srv.Addr(), "")
	var err error
	for i := 0; i < 200; i++ {
		_, err = anon.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "n1", JoinToken: "cjt_made-up"})
		if status.Code(err) != codes.Unauthenticated && status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.PermissionDenied {
			break
		}
	}
	if status.Code(err) != codes.ResourceExhausted || client.ReasonOf(err) != authz.ReasonRateLimited {
		t.Fatalf("200 joins with a made-up token from one address: the last ended %v (reason %q), want RESOURCE_EXHAUSTED %s", err, client.ReasonOf(err), authz.ReasonRateLimited)
	}
	if _, err := testharness.Dial(t, srv.Addr()).Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil {
		t.Fatalf("an admin from the same address: %v", err)
	}
}

// Calls with a credential that names no one are limited per peer address
// like calls without one: each cost a store read (the token's hash looked
// up), and were refused UNAUTHENTICATED before any limit, so one address
// could make the store read made-up tokens at will. The address is served
// again once the flood stops (a valid token the cache does not hold waits
// for the address's bucket meanwhile, like the made-up ones).
func TestInvalidCredentialsAreRateLimitedPerPeer(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, tightPeerLimits)
	ctx := ctxT(t)
	admin := testharness.Dial(t, srv.Addr())
	if _, err := admin.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil {
		t.Fatal(err)
	}
	bad := testharness.DialAs(t, srv.Addr(), authz.TokenPrefix+"made-up")
	var err error
	for i := 0; i < 200; i++ {
		if _, err = bad.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); status.Code(err) != codes.Unauthenticated {
			break
		}
	}
	if status.Code(err) != codes.ResourceExhausted || client.ReasonOf(err) != authz.ReasonRateLimited {
		t.Fatalf("200 calls with a made-up token from one address: the last ended %v (reason %q), want RESOURCE_EXHAUSTED %s", err, client.ReasonOf(err), authz.ReasonRateLimited)
	}
	testharness.WaitFor(t, 20*time.Second, "an admin from the same address served again", func() bool {
		_, err := admin.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
		return err == nil
	})
}
