package testharness

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/tick"
)

// TestLease is the node lease tests run with: long enough that a live node
// keeps it on a loaded machine (a node also stops its agents, and dials
// again, when its control plane is silent for most of a lease). Tests of
// what a lapsed lease does set ShortLease.
const TestLease = 20 * time.Second

// ShortLease gives c etcd's shortest node lease (2s), for tests of what a
// lapsed lease does: a silent node marked down, a cut-off node stopping
// its agents. Other tests keep TestLease, which load cannot lapse.
func ShortLease(c *controlplane.Config) { c.LeaseTTL = 2 * time.Second }

// ControlPlaneConfig returns the test defaults: embedded etcd in a temp
// dir, loopback ports picked by the kernel, a node lease of TestLease
// with heartbeats every 500ms (a revoked node is cut at its next one).
func ControlPlaneConfig(t testing.TB) controlplane.Config {
	cfg := controlplane.DefaultConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), "etcd")
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.LeaseTTL = TestLease
	cfg.Heartbeat = 500 * time.Millisecond
	cfg.Shutdown = 5 * time.Second
	cfg.Store.QuotaBytes = 256 << 20
	cfg.Auth.BootstrapToken = AdminToken()
	cfg.Insecure = true // plaintext on loopback, as --dev
	return cfg
}

// StartControlPlane starts a control plane replica for the test (Nomad's
// TestServer pattern): cb may change the config first. It stops at cleanup.
func StartControlPlane(t testing.TB, cb func(*controlplane.Config)) *controlplane.Server {
	t.Helper()
	cfg := ControlPlaneConfig(t)
	if cb != nil {
		cb(&cfg)
	}
	if cfg.SecretsKeyFile == "" && cfg.DataDir != "" && !cfg.Dev {
		// Apart from the data dir, as outside --dev, and the same one
		// whenever a test starts the control plane again on that dir.
		cfg.SecretsKeyFile = filepath.Join(filepath.Dir(cfg.DataDir), controlplane.SecretsKeyFileName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	core, logs := observer.New(zapcore.InfoLevel)
	lg := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })))
	s, err := controlplane.Start(ctx, cfg, lg)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	cpLogs.Store(s, logs)
	t.Cleanup(func() { s.Stop(); cpLogs.Delete(s) })
	return s
}

// cpLogs holds what each control plane StartControlPlane started logged
// (info and up).
var cpLogs sync.Map // *controlplane.Server -> *observer.ObservedLogs

// ControlPlaneLogs returns what srv (from StartControlPlane) has logged at
// info level and up, such as its audit lines.
func ControlPlaneLogs(t testing.TB, srv *controlplane.Server) *observer.ObservedLogs {
	t.Helper()
	logs, ok := cpLogs.Load(srv)
	if !ok {
		t.Fatal("ControlPlaneLogs: the control plane was not started by StartControlPlane")
	}
	return logs.(*observer.ObservedLogs)
}

// Dial returns an admin's client for addr, closed at cleanup.
func Dial(t testing.TB, addr string) *client.Client {
	t.Helper()
	return DialAs(t, addr, AdminToken())
}

// DialServer returns an admin's client for srv: over TLS trusting its CA
// when it serves TLS, else plaintext. Closed at cleanup.
func DialServer(t testing.TB, srv *controlplane.Server) *client.Client {
	t.Helper()
	c, err := client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Token: AdminToken(), Insecure: true}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// DialAs returns a client presenting token ("" for none), closed at
// cleanup.
func DialAs(t testing.TB, addr, token string) *client.Client {
	t.Helper()
	c, err := client.DialToken(addr, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// StartNode runs an in-process node daemon against addr until the test
// ends (or the returned stop is called). cb may change its config.
func StartNode(t testing.TB, addr, name string, cb func(*node.Config)) (stop func()) {
	t.Helper()
	_, stop = StartNodeDaemon(t, addr, name, cb)
	return stop
}

// StartNodeDaemon is StartNode returning the daemon too, for a test that
// drives one of its steps itself (node's export_test.go).
func StartNodeDaemon(t testing.TB, addr, name string, cb func(*node.Config)) (a *node.Daemon, stop func()) {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.ControlPlane, cfg.Name, cfg.DataDir = addr, name, filepath.Join(t.TempDir(), "node-"+name)
	cfg.ReconnectMax = time.Second
	cfg.UserEnv = ScratchEnv(t) // the node's "own" agents are a scratch home's
	cfg.Agents = MissingAgents(cfg.DataDir)
	cfg.JoinToken = AdminToken()
	cfg.AgentChecks = false // a test that wants the canaries sets it in cb
	cfg.Adopt = false       // likewise adoption of the native sessions in its home
	if cb != nil {
		cb(&cfg)
	}
	a, err := node.New(cfg, zaptest.NewLogger(t).Named(name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return a, stop
}

// WaitConnected waits until ListNodes shows node name connected (want) or
// not.
func WaitConnected(t testing.TB, c *client.Client, name string, want bool) {
	t.Helper()
	WaitFor(t, 20*time.Second, fmt.Sprintf("node %s connected=%v", name, want), func() bool {
		resp, err := c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		if err != nil {
			return false
		}
		for _, n := range resp.Nodes {
			if n.Name == name {
				return n.Connected == want
			}
		}
		return !want
	})
}

// Heartbeats keeps a node stream a test speaks for itself connected,
// sending a heartbeat every 300ms until ctx ends or a send fails.
func Heartbeats(ctx context.Context, stream castv1.NodeService_ConnectClient) {
	seq := int64(0)
	tick.Every(ctx, 300*time.Millisecond, func() bool {
		seq++
		return stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Heartbeat{Heartbeat: &castv1.Heartbeat{Seq: seq}}}) == nil
	})
}

// MissingAgents names every agent at a CLI path under dir that does not
// exist: the node advertises them all, so sessions of any agent can be
// placed on it, and a turn fails at once with "binary not found" instead of
// reaching a real model. Tests that run turns configure real CLIs instead.
func MissingAgents(dir string) map[string]node.AgentSetup {
	out := map[string]node.AgentSetup{}
	for _, name := range agents.Names() {
		out[name] = node.AgentSetup{Bin: filepath.Join(dir, "no-agent-cli", name)}
	}
	return out
}

// WaitFor polls cond every 50ms until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DialFollowing returns a client trusting the CA of pin that follows the
// control plane's trust bundle through a CA rotation (as the CLI and
// nodes do), with token and, when id is not nil, its client certificate.
// Closed at cleanup.
func DialFollowing(t testing.TB, addr, pin, token string, id *client.Identity) (*client.Client, *pki.Trust) {
	t.Helper()
	trust, err := pki.NewTrust(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := trust.Config()
	if id != nil {
		tlsCfg = client.WithIdentity(tlsCfg, id)
	}
	c, err := client.DialOpts(addr, client.Options{Token: client.NewToken(token), TLS: tlsCfg,
		Bundle: &client.BundleSync{Have: trust.Hash, Keep: trust.SetBundle, Warn: func(err error) { t.Errorf("bundle: %v", err) }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, trust
}
