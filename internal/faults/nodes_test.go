package faults_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/testharness"
)

// noAgents is a node without agent CLIs: the store faults are about what
// is stored, so the node takes its sessions and fails their turns at once.
func noAgents(cfg *node.Config) { cfg.AgentBins = nil }

// withClaude runs the real Claude Code CLI against fake, in its own HOME.
func withClaude(t *testing.T, fake *fakemodel.Server) func(*node.Config) {
	home, env := agenttest.Env(t, "claude", fake.URL)
	bin := agenttest.Bin(t, "claude")
	return func(cfg *node.Config) {
		cfg.AgentBins = nil
		// A refused prompt fails at once instead of being retried.
		cfg.Agents = map[string]node.AgentSetup{"claude": {Bin: bin, Home: home, Env: append(env, "CLAUDE_CODE_MAX_RETRIES=0")}}
	}
}

// connected reports whether the control plane lists node as connected;
// ok is false when it could not be asked.
func connected(c *client.Client, node string) (conn, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
	if err != nil {
		return false, false
	}
	for _, n := range resp.Nodes {
		if n.Name == node {
			return n.Connected, true
		}
	}
	return false, true
}

// waitConnected waits until the control plane lists node as connected.
func waitConnected(t *testing.T, c *client.Client, node string, timeout time.Duration) {
	t.Helper()
	testharness.WaitFor(t, timeout, node+" connected", func() bool { conn, _ := connected(c, node); return conn })
}

// nodeDown waits until the control plane shows node down (its lease lapsed
// or its stream ended).
func nodeDown(t *testing.T, c *client.Client, node string) {
	t.Helper()
	testharness.WaitFor(t, 30*time.Second, node+" down", func() bool { conn, ok := connected(c, node); return ok && !conn })
}

// startNode runs an in-process node whose data dir the test knows (dir, or
// a new one when dir is ""), so the checker can read what it believes it
// owns.
func startNode(t *testing.T, addr, name, dir string, cb func(*node.Config)) (dataDir string, stop func()) {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "node-"+name)
	}
	stop = testharness.StartNode(t, addr, name, func(cfg *node.Config) {
		if cb != nil {
			cb(cfg)
		}
		cfg.DataDir = dir
	})
	return dir, stop
}

// nodeState is the node's state file as far as the test reads it.
type nodeState struct {
	Sessions map[string]struct {
		ReceivedSeq  int64 `json:"received_seq"`
		DeliveredSeq int64 `json:"delivered_seq"`
	} `json:"sessions"`
}

// readState parses the node's state file; an error is a corrupt state.
func readState(t *testing.T, dir string) nodeState {
	t.Helper()
	b, err := statefile.Read(filepath.Join(dir, "state.json"), "sessions")
	if err != nil {
		t.Fatal(err)
	}
	var st nodeState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state.json is corrupt: %v\n%s", err, b)
	}
	return st
}

// claims reads the nodes' state files (node name -> data dir): a node acts
// as the owner of every session its state holds.
func claims(dirs map[string]string) faults.Claims {
	return func(context.Context) (map[string][]string, error) {
		out := map[string][]string{}
		for node, dir := range dirs {
			b, err := statefile.Read(filepath.Join(dir, "state.json"), "sessions")
			if err != nil {
				return nil, err
			}
			var st nodeState
			if err := json.Unmarshal(b, &st); err != nil {
				return nil, err
			}
			for id := range st.Sessions {
				out[id] = append(out[id], node)
			}
		}
		return out, nil
	}
}
