package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node whose claude has no login shows it not ready; once the user logs
// in (the credential file appears), `cast nodes` shows it ready while the
// node stays connected on the same stream: the node looks again on its
// timer and sends a NodeInfo frame. The wait is on the control plane's
// view, bounded.
func TestNodeAdvertisesALoginWithoutReconnecting(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	var home string
	testharness.StartNode(t, srv.Addr(), "n1", func(cfg *node.Config) {
		home = runner.EnvValue(cfg.UserEnv, "HOME") // the user's own (scratch) home
		cfg.Agents["claude"] = node.AgentSetup{Bin: "/usr/bin/true"}
		cfg.ReadinessInterval = 50 * time.Millisecond
	})
	claude := func() (*castv1.Node, *castv1.AgentInstall) {
		resp, err := c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		if err != nil || len(resp.Nodes) != 1 {
			return nil, nil
		}
		for _, a := range resp.Nodes[0].Agents {
			if a.Name == "claude" {
				return resp.Nodes[0], a
			}
		}
		return resp.Nodes[0], nil
	}
	var connectedAt *time.Time
	testharness.WaitFor(t, 20*time.Second, "node n1 connected with claude", func() bool {
		n, a := claude()
		if n == nil || !n.Connected || a == nil {
			return false
		}
		at := n.ConnectTime.AsTime()
		connectedAt = &at
		return true
	})
	if _, a := claude(); a.Ready {
		t.Fatalf("claude is ready before any login: %q", a.Status)
	}

	cred := filepath.Join(home, ".claude", ".credentials.json")
	if err := os.MkdirAll(filepath.Dir(cred), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cred, []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-test","scopes":["user:inference"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 20*time.Second, "claude shown ready", func() bool {
		_, a := claude()
		return a != nil && a.Ready
	})
	n, a := claude()
	if !n.Connected || !n.ConnectTime.AsTime().Equal(*connectedAt) {
		t.Fatalf("the node reconnected (connected %v at %v, first at %v); the update should come on its stream", n.Connected, n.ConnectTime.AsTime(), *connectedAt)
	}
	if want := "logged in (" + cred + ")"; a.Status != want {
		t.Fatalf("claude status %q, want %q", a.Status, want)
	}
}
