package controlplane_test

import (
	"context"
	"path/filepath"
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
		wantEndedWithin(t, time.Second, step.name, "", step.ends, step.stays)
	}
}

// wantEndedWithin checks that each call of ends ended UNAUTHENTICATED
// (with reason, unless it is "") within d of now, after what, and that
// none of stays did.
func wantEndedWithin(t *testing.T, d time.Duration, what, reason string, ends, stays map[string]chan error) {
	t.Helper()
	deadline := time.After(d)
	for call, ended := range ends {
		select {
		case err := <-ended:
			if status.Code(err) != codes.Unauthenticated || reason != "" && client.ReasonOf(err) != reason {
				t.Errorf("after %s, %s ended with %v (reason %q), want UNAUTHENTICATED %s", what, call, err, client.ReasonOf(err), reason)
			}
		case <-deadline:
			t.Fatalf("%s was still open %s after %s", call, d, what)
		}
	}
	for call, open := range stays {
		select {
		case err := <-open:
			t.Fatalf("%s ended (%v) after %s, which did not revoke it", call, err, what)
		default:
		}
	}
}

// Client certificates, two TLS replicas on one etcd: `cast node rm`
// through replica A ends the removed node's Connect stream made with its
// certificate on replica B, and retiring a CA through A (`cast ca
// rotate`, `activate`, `retire`) ends, within a second, the calls on B
// made with a certificate that CA issued (CERT_UNTRUSTED), while calls
// made with a token stay open. B's CA reload interval is the default
// (2s): the CA record's watch is what reaches it in time.
func TestCertRevocationEndsOpenCallsOnEveryReplica(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	key := filepath.Join(t.TempDir(), "secrets.key")
	cfg := func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir, c.SecretsKeyFile, c.TLS.Enabled = []string{ep}, "", key, true
	}
	a := testharness.StartControlPlane(t, cfg)
	b := testharness.StartControlPlane(t, cfg)
	ctx, oldPin := ctxT(t), a.CAPin()
	adminA, _ := testharness.DialFollowing(t, a.Addr(), oldPin, testharness.AdminToken(), nil)
	adminB, _ := testharness.DialFollowing(t, b.Addr(), oldPin, testharness.AdminToken(), nil)

	n1ID, err := client.LoadIdentity(filepath.Join(t.TempDir(), "n1.pem"))
	must(t, err)
	must(t, n1ID.Renew(ctx, "n1", adminA.JoinSigner("n1", testharness.AdminToken())))
	n1B, _ := testharness.DialFollowing(t, b.Addr(), oldPin, "", n1ID)
	connect := openConnect(t, ctx, n1B, "n1")
	_, aliceID := aliceCert(ctx, t, adminA, a.Addr(), oldPin)
	aliceB, _ := testharness.DialFollowing(t, b.Addr(), oldPin, "", aliceID)
	sess, err := aliceB.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "n1", Cwd: "/tmp"})
	must(t, err)
	aliceWatch := openWatch(t, ctx, aliceB, sess.Id)
	adminWatch := openWatch(t, ctx, adminB, sess.Id)

	must(t, func() error {
		_, err := adminA.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: "n1"})
		return err
	}())
	wantEndedWithin(t, time.Second, "cast node rm n1", "", map[string]chan error{"n1's Connect (certificate) on B": connect},
		map[string]chan error{"alice's WatchSession (certificate) on B": aliceWatch, "admin's WatchSession (token) on B": adminWatch})

	_, err = adminA.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	must(t, err)
	_, err = adminA.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{Force: true})
	must(t, err)
	_, err = adminA.Auth.RetireCA(ctx, &castv1.RetireCARequest{Force: true})
	must(t, err)
	wantEndedWithin(t, time.Second, "cast ca retire", "CERT_UNTRUSTED", map[string]chan error{"alice's WatchSession (old CA's certificate) on B": aliceWatch},
		map[string]chan error{"admin's WatchSession (token) on B": adminWatch})
}

// An OIDC ID token has no record to revoke: an admin disables the person
// at the issuer, which issues no new token. The calls the old one opened
// end at its exp (OIDC_TOKEN_EXPIRED), not whenever the client hangs up;
// a cast token's call stays open.
func TestOIDCCallsEndAtTokenExpiry(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast"
	})
	ctx, admin := ctxT(t), testharness.Dial(t, srv.Addr())
	join, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	must(t, err)
	joined, err := testharness.DialAs(t, srv.Addr(), "").Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "raw1", JoinToken: join.Token})
	must(t, err)
	openConnect(t, ctx, testharness.DialAs(t, srv.Addr(), joined.Credential), "raw1")

	claims := iss.Claims("alice@example.com", "cast", 8*time.Second) // room to open the watch on a loaded machine
	exp := time.Unix(claims["exp"].(int64), 0)
	alice := testharness.DialAs(t, srv.Addr(), iss.Token(t, claims))
	sess, err := alice.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "raw1", Cwd: "/tmp"})
	must(t, err)
	wantWatchEndsAt(t, exp, "alice's ID token expired", "OIDC_TOKEN_EXPIRED",
		openWatch(t, ctx, alice, sess.Id), openWatch(t, ctx, admin, sess.Id))
}

// wantWatchEndsAt checks that alice's watch stays open until just before
// exp and ends with reason within a second after it, while the admin's
// (a token's) stays open.
func wantWatchEndsAt(t *testing.T, exp time.Time, what, reason string, aliceWatch, adminWatch chan error) {
	t.Helper()
	early := exp.Add(-250 * time.Millisecond) // clear of the expiry itself
	select {
	case err := <-aliceWatch:
		t.Fatalf("alice's WatchSession ended before %s (%s): %v", exp, what, err)
	case <-time.After(time.Until(early)):
	}
	wantEndedWithin(t, time.Until(exp.Add(time.Second)), what, reason, map[string]chan error{"alice's WatchSession": aliceWatch},
		map[string]chan error{"admin's WatchSession (token)": adminWatch})
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

// A call made with a client certificate ends when the certificate expires
// (CERT_EXPIRED), as an ID token's calls end at its exp: a client keeps no
// stream past the certificate it opened it with (a node that renewed
// redials, its new calls carry the new one), while a token's call stays
// open.
func TestCertCallsEndAtCertificateExpiry(t *testing.T) {
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.TLS.Enabled, c.TLS.UserCertTTL = true, 6*time.Second // room to open the watch on a loaded machine
	})
	ctx, pin := ctxT(t), srv.CAPin()
	admin, _ := testharness.DialFollowing(t, srv.Addr(), pin, testharness.AdminToken(), nil)
	joined, err := admin.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "raw1", JoinToken: testharness.AdminToken()})
	must(t, err)
	asNode, _ := testharness.DialFollowing(t, srv.Addr(), pin, joined.Credential, nil)
	openConnect(t, ctx, asNode, "raw1")

	_, aliceID := aliceCert(ctx, t, admin, srv.Addr(), pin)
	exp := aliceID.Cert().Leaf.NotAfter
	alice, _ := testharness.DialFollowing(t, srv.Addr(), pin, "", aliceID)
	sess, err := alice.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "raw1", Cwd: "/tmp"})
	must(t, err)
	wantWatchEndsAt(t, exp, "alice's certificate expired", "CERT_EXPIRED",
		openWatch(t, ctx, alice, sess.Id), openWatch(t, ctx, admin, sess.Id))
}
