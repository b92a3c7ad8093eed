package controlplane_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// With --tls the control plane serves certificates from a CA it made on
// first start and keeps (sealed) in the store: clients trusting the CA
// file or its pin get through, plaintext and other CAs do not, a node
// joins by pin, and a restart serves from the same CA.
func TestTLS(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "etcd")
	on := func(c *controlplane.Config) { c.TLS.Enabled, c.DataDir = true, dataDir }
	srv := testharness.StartControlPlane(t, on)
	ctx := ctxT(t)
	caPEM, err := os.ReadFile(srv.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseCert(caPEM)
	if err != nil || pki.Pin(ca) != srv.CAPin() {
		t.Fatalf("CA file %v, pin %s vs %s", err, srv.CAPin(), pki.Pin(ca))
	}
	dial := func(c client.Context) *client.Client {
		c.Addr, c.Token = srv.Addr(), testharness.AdminToken()
		cl, err := c.Dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	byFile := dial(client.Context{CA: srv.CAFile()})
	if _, err := byFile.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{}); err != nil {
		t.Fatalf("TLS with the CA file: %v", err)
	}
	other, _, err := pki.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _ := pki.ParseCert(other)
	for name, c := range map[string]*client.Client{
		"plaintext": testharness.Dial(t, srv.Addr()),
		"wrong pin": dial(client.Context{CAPin: pki.Pin(otherCA)}),
	} {
		if _, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{}); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: got %v, want UNAVAILABLE (no handshake)", name, err)
		}
	}
	testharness.StartNode(t, srv.Addr(), "n1", func(c *node.Config) { c.CAPin = srv.CAPin() })
	waitConnected(t, byFile, "n1", true)

	pin := srv.CAPin()
	srv.Stop()
	again := testharness.StartControlPlane(t, on)
	if again.CAPin() != pin {
		t.Errorf("restart made a new CA: pin %s, was %s", again.CAPin(), pin)
	}
}

// The name scrapers verify nodes by is never the control plane's: a
// control plane certificate carrying it could pass for a node.
func TestTLSSANRefusesNodeMetricsName(t *testing.T) {
	t.Parallel()
	c := controlplane.TLSConfig{Enabled: true, NodeCertTTL: time.Hour, UserCertTTL: time.Hour}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Hosts = []string{"cp.example", strings.ToUpper(pki.NodeMetricsName)}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--tls-san") {
		t.Fatalf("--tls-san %s: %v", pki.NodeMetricsName, err)
	}
}
