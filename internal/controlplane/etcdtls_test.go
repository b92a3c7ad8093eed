package controlplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A control plane reaches an external etcd that requires TLS client
// certificates and etcd auth: with the right CA, certificate and
// password it serves; with a wrong CA it refuses to start, saying why.
func TestControlPlaneOverTLSEtcd(t *testing.T) {
	t.Parallel()
	etcd := testharness.StartSecureEtcd(t)
	etcd.EnableAuth(t, "cast-user", "right-password")
	ep := etcd.URL
	access := store.Access{CACert: etcd.CA.File, Cert: etcd.Cert, Key: etcd.Key, User: "cast-user", Password: "right-password"}

	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir, c.Etcd = []string{ep}, "", access
	})
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil) // registers under a lease
	waitConnected(t, c, "n1", true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatalf("create a session over TLS etcd: %v", err)
	}
	if got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id}); err != nil || got.Id != sess.Id {
		t.Fatalf("read it back: %v %v", got, err)
	}

	cfg := testharness.ControlPlaneConfig(t)
	cfg.EtcdEndpoints, cfg.DataDir, cfg.Etcd = []string{ep}, "", access
	cfg.Etcd.CACert = etcd.OtherCA.File
	if s, err := controlplane.Start(ctx, cfg, zaptest.NewLogger(t)); !errors.Is(err, store.ErrEtcdServerCert) {
		if s != nil {
			s.Stop()
		}
		t.Fatalf("start with a wrong --etcd-cacert: %v, want %v", err, store.ErrEtcdServerCert)
	}
}

func TestEtcdAccessNeedsExternalEtcd(t *testing.T) {
	t.Parallel()
	cfg := testharness.ControlPlaneConfig(t) // embedded etcd
	cfg.Etcd.CACert = "ca.pem"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "give --etcd-endpoints") {
		t.Fatalf("Validate() = %v, want a refusal naming --etcd-endpoints", err)
	}
}
