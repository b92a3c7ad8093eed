// Package testharness starts real cast components for tests: embedded etcd
// in a temp dir, a control plane on loopback gRPC, node daemons, the built
// binaries. Cast's own components here are real, never mocks (the
// pattern of Nomad's TestServer); only the OIDC issuer (OIDCIssuer) is a
// fake, standing in for an identity provider.
package testharness

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/etcdembed"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
)

// EtcdConfig tunes StartEtcd.
type EtcdConfig struct {
	Dir        string // default: a new t.TempDir()
	QuotaBytes int64
}

// StartEtcd runs an embedded etcd on loopback until the test ends and
// returns its client URL.
func StartEtcd(t testing.TB, cb func(*EtcdConfig)) string {
	t.Helper()
	c := EtcdConfig{Dir: t.TempDir(), QuotaBytes: 256 << 20}
	if cb != nil {
		cb(&c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := etcdembed.Start(ctx, etcdembed.Config{
		Dir: c.Dir, ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", QuotaBytes: c.QuotaBytes,
		NoAuth: true, // tests dial it without credentials
	}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(e.Close)
	return e.ClientURL
}

// OpenStore opens a Store on endpoint until the test ends.
func OpenStore(t testing.TB, endpoint string, cb func(*store.Config)) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.QuotaBytes = 256 << 20
	if cb != nil {
		cb(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, []string{endpoint}, store.Access{}, cfg, metrics.NewStore(nil), zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
