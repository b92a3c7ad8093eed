package testharness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/etcdembed"
)

// RestartableEtcd is an embedded etcd that a test can stop and start again
// on the same data dir and the same loopback ports, so a client dialed to
// ClientURL reconnects by itself: the crash-and-recover fault of the
// linearizability tests. StartEtcd's member cannot do this: it picks new
// ports and is closed only at cleanup.
type RestartableEtcd struct {
	ClientURL string // fixed for the member's whole life

	t   testing.TB
	cfg etcdembed.Config

	e Slot[*etcdembed.Etcd]
}

// StartRestartableEtcd starts a member in a new temp dir; it is stopped when
// the test ends.
func StartRestartableEtcd(t testing.TB) *RestartableEtcd {
	t.Helper()
	r := newRestartable(t, etcdembed.Config{PeerAddr: freeLoopbackAddr(t)})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// newRestartable fixes cfg's data dir and client port (the peer address
// is the caller's: a cluster needs all of them up front); the member is
// stopped when the test ends. It is not started.
func newRestartable(t testing.TB, cfg etcdembed.Config) *RestartableEtcd {
	t.Helper()
	cfg.Dir, cfg.ClientAddr, cfg.QuotaBytes = t.TempDir(), freeLoopbackAddr(t), 256<<20
	cfg.NoAuth = true // tests dial it without credentials
	r := &RestartableEtcd{t: t, cfg: cfg, ClientURL: "http://" + cfg.ClientAddr}
	t.Cleanup(r.Stop)
	return r
}

// Start starts the member again (a no-op while it runs).
func (r *RestartableEtcd) Start() error {
	_, err := r.e.Start(func() (*etcdembed.Etcd, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		e, err := etcdembed.Start(ctx, r.cfg, zaptest.NewLogger(r.t))
		if err != nil {
			return nil, fmt.Errorf("restart embedded etcd: %w", err)
		}
		return e, nil
	})
	return err
}

// Stop stops the member; its data dir stays (a no-op while stopped).
func (r *RestartableEtcd) Stop() { r.e.Stop((*etcdembed.Etcd).Close) }

// Restart stops the member, waits down, and starts it again.
func (r *RestartableEtcd) Restart(down time.Duration) error {
	r.Stop()
	time.Sleep(down)
	return r.Start()
}

// FreeAddr is a free loopback host:port for a process the test starts
// (a control plane replica's --listen), kept apart from outgoing ports.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return freeLoopbackAddr(t)
}

// freeLoopbackAddr picks a free port once, so restarts reuse it (below
// the ephemeral range: no outgoing connection takes it while the member is
// down).
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	addr, err := etcdembed.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
