package controlplane_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// dialCert dials srv over TLS presenting the client certificate in
// certFile and no token.
func dialCert(t *testing.T, srv *controlplane.Server, certFile string) *client.Client {
	t.Helper()
	c, err := client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Cert: certFile}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func leafOf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	id, err := client.LoadIdentity(certFile)
	if err != nil || !id.HasCert() {
		t.Fatalf("identity %s: %v", certFile, err)
	}
	return id.Cert().Leaf
}

// Nodes on a TLS control plane prove who they are with client
// certificates for keys they made: joined with a join token, named by the
// certificate alone, renewed before expiry while the node keeps working,
// and refused when expired, from another CA, or revoked.
func TestNodeCertificates(t *testing.T) {
	// 15 s certificates: renewed at two thirds of their life, so a
	// renewal has 5 s to land, which a loaded 2-core machine needs (at
	// 6 s, with a load of 18, renewals came too late and the node gave up).
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.TLS.Enabled, c.TLS.NodeCertTTL, c.TLS.UserCertTTL = true, 15*time.Second, 15*time.Second
	})
	ctx := ctxT(t)
	admin, err := client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Token: testharness.AdminToken()}.Dial()
	must(t, err)
	defer admin.Close()
	join, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	must(t, err)
	dirA, dirB := filepath.Join(t.TempDir(), "na"), filepath.Join(t.TempDir(), "nb")
	testharness.StartNode(t, srv.Addr(), "na", func(c *node.Config) { c.CAPin, c.JoinToken, c.DataDir = srv.CAPin(), join.Token, dirA })
	testharness.StartNode(t, srv.Addr(), "nb", func(c *node.Config) { c.CAPin, c.DataDir = srv.CAPin(), dirB })
	waitConnected(t, admin, "na", true)
	waitConnected(t, admin, "nb", true)

	idA := node.IdentityPath(dirA)
	if fi, err := os.Stat(idA); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node identity file: %v %v, want mode 0600", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dirA, node.CredentialFile)); !os.IsNotExist(err) {
		t.Errorf("a node joined by certificate also holds a bearer credential: %v", err)
	}
	first := leafOf(t, idA)
	asA := dialCert(t, srv, idA)
	// Copies of the first certificate: the node replaces its file.
	copyID := func(to string) {
		b, err := os.ReadFile(idA)
		must(t, err)
		must(t, os.WriteFile(to, b, 0o600))
	}
	firstCopy, followed := filepath.Join(t.TempDir(), "first.pem"), filepath.Join(t.TempDir(), "followed.pem")
	copyID(firstCopy)
	copyID(followed)
	follower := dialCert(t, srv, followed) // a long-lived client of a file that is renewed
	if _, err := follower.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil {
		t.Fatal(err)
	}
	if who, err := asA.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil || who.Principal != "node:na" {
		t.Fatalf("whoami with na's certificate: %v %v", who, err)
	}

	// A cannot act as B, nor touch B's session.
	// nb moves its stream to a new connection at each renewal (every few
	// seconds here), and is not connected for that moment.
	var sB *castv1.Session
	testharness.WaitFor(t, 20*time.Second, "a session made on nb", func() bool {
		sB, err = admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "nb"})
		if client.ReasonOf(err) == errs.ReasonNodeNotConn {
			return false
		}
		must(t, err)
		return true
	})
	_, err = asA.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sB.Id, Node: "nb", OwnerToken: 1,
		Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "forged", ClientId: "c1"}}})
	wantDenied(t, "na appends as nb", err, codes.PermissionDenied, errs.ReasonNodeMismatch)
	_, err = asA.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "nb", Agent: "claude", Account: "a", Grant: "g"})
	wantDenied(t, "na fetches nb's credential", err, codes.PermissionDenied, errs.ReasonNodeMismatch)
	_, err = asA.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sB.Id})
	wantDenied(t, "na reads nb's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)

	// Another CA's certificate naming na (with its real credential record).
	foreign := dialCert(t, srv, testharness.ForeignCert(t, pki.Identity{Role: "node", Name: "na", Cred: first.Subject.SerialNumber}))
	_, err = foreign.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
	wantDenied(t, "another CA's certificate", err, codes.Unauthenticated, errs.ReasonCertUntrusted)

	// Renewal: na gets a new certificate before the first expires, and
	// keeps working past that expiry (a turn on it is still reported).
	testharness.WaitFor(t, 40*time.Second, "na's certificate renewed", func() bool {
		return leafOf(t, idA).SerialNumber.Cmp(first.SerialNumber) != 0
	})
	testharness.WaitFor(t, 40*time.Second, "na's first certificate to expire", func() bool { return time.Now().After(first.NotAfter) })
	_, err = dialCert(t, srv, firstCopy).Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
	wantDenied(t, "an expired certificate", err, codes.Unauthenticated, errs.ReasonCertExpired)
	// The follower's connection holds the expired certificate; its file
	// now holds the renewed one, which the refused call redials with.
	copyID(followed)
	if who, err := follower.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil || who.Principal != "node:na" {
		t.Errorf("a client whose certificate file was renewed: %v %v", who, err)
	}
	sA, err := admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "na", Text: "hi"})
	must(t, err)
	testharness.WaitFor(t, 40*time.Second, "na to report the turn after renewal", func() bool {
		s, err := admin.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sA.Id})
		return err == nil && s.State == castv1.SessionState_SESSION_STATE_FAILED
	})
	waitConnected(t, admin, "na", true)
	renewed := dialCert(t, srv, idA)
	if who, err := renewed.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil || who.Principal != "node:na" {
		t.Fatalf("whoami with na's renewed certificate: %v %v", who, err)
	}

	// Revocation refuses the (valid) certificate at once.
	if r, err := admin.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: "na"}); err != nil || !r.Revoked {
		t.Fatalf("revoke: %v %v", r, err)
	}
	_, err = renewed.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
	wantDenied(t, "a revoked node's certificate", err, codes.Unauthenticated, errs.ReasonCertRevoked)
	waitConnected(t, admin, "na", false)

	// No certificate without a valid join token.
	key, err := pki.NewKey()
	must(t, err)
	csr, err := pki.CSR(key, "nc")
	must(t, err)
	_, err = admin.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "nc", JoinToken: join.Token, Csr: csr})
	wantDenied(t, "a used join token", err, codes.Unauthenticated, errs.ReasonJoinToken)
}
