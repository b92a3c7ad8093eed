package node_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// identitySerial is the serial of the certificate in a node's identity
// file.
func identitySerial(t *testing.T, dataDir string) string {
	t.Helper()
	id, err := client.LoadIdentity(node.IdentityPath(dataDir))
	if err != nil || !id.HasCert() {
		t.Fatalf("node identity: %v", err)
	}
	return id.Cert().Leaf.SerialNumber.String()
}

// A renewal that lands after the old certificate expired: the control
// plane signed it in time, but its answer (held by a partition) reached
// the node only after the control plane had ended the node's stream for
// the expired certificate. The node reconnects with the renewed
// certificate it now holds; it used to give up ("join again").
func TestNodeRenewalLandingAfterExpiry(t *testing.T) {
	// Short-lived certificates so the expiry comes within the test: the
	// node renews at two thirds (6 s), which leaves the test 6 s to hold
	// the answers before the renewal is asked for.
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.TLS.Enabled, c.TLS.NodeCertTTL = true, 9*time.Second
	})
	ctx := ctxT(t)
	admin, err := client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Token: testharness.AdminToken()}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	join, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	proxy := testharness.StartProxy(t, srv.Addr())
	dir := filepath.Join(t.TempDir(), "n1")
	testharness.StartNode(t, proxy.Addr, "n1", func(c *node.Config) { c.CAPin, c.JoinToken, c.DataDir = srv.CAPin(), join.Token, dir })
	testharness.WaitConnected(t, admin, "n1", true)
	id, err := client.LoadIdentity(node.IdentityPath(dir))
	if err != nil || !id.HasCert() {
		t.Fatalf("node identity: %v", err)
	}
	first := id.Cert().Leaf

	// Hold every answer to the node: its renewal reaches the control
	// plane, which signs it, but the node learns so only after the heal.
	proxy.Blackhole(testharness.FromTarget)
	if identitySerial(t, dir) != first.SerialNumber.String() {
		t.Fatal("the node renewed before the partition (a loaded machine): the race this test is about did not happen")
	}
	// The control plane ends the stream at the first certificate's expiry
	// (CERT_EXPIRED, held in the partition too).
	testharness.WaitConnected(t, admin, "n1", false)
	if time.Now().Before(first.NotAfter) {
		t.Fatalf("n1 disconnected before its certificate expired (%s)", first.NotAfter)
	}
	proxy.Heal()
	testharness.WaitFor(t, 20*time.Second, "the renewed certificate on disk", func() bool {
		return identitySerial(t, dir) != first.SerialNumber.String()
	})
	testharness.WaitConnected(t, admin, "n1", true)
}
