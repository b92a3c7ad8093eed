package node_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/testharness"
)

// A probe of OpenCode whose model never answers times out before the CLI
// printed anything, so the probe never learns the session the CLI made in
// its store. That session must go all the same, and the node's adoption
// must never take it for one of the user's: the real OpenCode CLI against
// the fake model, a real control plane, the node's probe loop and its
// adoption scanning every 200 ms. The user's own session, run after the
// probe ended, is adopted: a scan that looked at the store once the probe
// was over has run.
func TestTimedOutProbeIsNotAdopted(t *testing.T) {
	const agent = "opencode"
	fm := fakemodel.Start(t)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) }) // before the fake stops (cleanups run last first)
	fm.SetPolicy(func(r fakemodel.Request) fakemodel.Reply {
		if strings.Contains(string(r.Body), runner.ProbePrompt) {
			return fakemodel.Reply{Gate: gate} // the probe's model never answers
		}
		return fakemodel.Reply{Text: "hello from the model"}
	})
	cp := testharness.StartControlPlane(t, nil)
	home, env := agenttest.NodeEnv(t, agent, fm.URL)
	// Room for the CLI to start and ask the model on a loaded machine; a
	// probe that timed out before asking made no session and proves
	// nothing (checked below).
	const timeout = 90 * time.Second
	testharness.StartNode(t, cp.Addr(), "laptop", func(cfg *node.Config) {
		cfg.Agents = map[string]node.AgentSetup{agent: {Bin: agenttest.Bin(t, agent), Home: home, Env: env}}
		cfg.Probe, cfg.ProbeTimeout = true, timeout
		// One probe: a failed one is due again at every look, and while
		// it runs the user's new session waits (adoptCast.Busy).
		cfg.ReadinessInterval = time.Hour
		cfg.Adopt, cfg.AdoptInterval, cfg.AdoptAgents = true, 200*time.Millisecond, []string{agent}
	})
	c := testharness.Dial(t, cp.Addr())

	testharness.WaitFor(t, timeout+2*time.Minute, "the node's opencode probed", func() bool {
		resp, err := c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		if err != nil {
			return false
		}
		for _, n := range resp.Nodes {
			for _, in := range n.Agents {
				if n.Name == "laptop" && in.Name == agent && in.Probed {
					if in.Ready || !strings.Contains(in.Status, "no answer within") {
						t.Fatalf("probe of a model that never answers: ready %v, %q", in.Ready, in.Status)
					}
					return true
				}
			}
		}
		return false
	})
	if !slices.ContainsFunc(fm.Turns(), func(r fakemodel.Request) bool { return strings.Contains(string(r.Body), runner.ProbePrompt) }) {
		t.Fatalf("the probe never reached the model within %s: it made no session to leave behind", timeout)
	}

	// The store keeps no session of the probe's folder.
	data := agenttest.NativeHome(home, agent)
	sl, _ := agents.DriverAs[agents.StoreLister](agent)
	stored, err := sl.StoredSessions(context.Background(), "", nil, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stored {
		t.Errorf("OpenCode's store keeps session %s of %s after the probe", s.ID, s.Cwd)
	}

	// The user's own session, as they run OpenCode: the node's environment
	// for it plus the HOME and folders the node derives for it.
	a, _ := agents.Lookup(agent)
	args, err := a.Args(agents.FormFresh, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	userEnv := append(slices.Clone(env), "HOME="+home, "XDG_DATA_HOME="+data,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"))
	userEnv = append(userEnv, a.Commands.Env...)
	cwd := agenttest.Cwd(t, home, "proj")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prompt := "USER-OWN hello"
	agenttest.MustRunInput(t, ctx, agenttest.Bin(t, agent), args, userEnv, cwd, &prompt)

	var sessions []*castv1.Session
	testharness.WaitFor(t, 2*time.Minute, "the user's own session adopted", func() bool {
		resp, err := c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
		if err != nil {
			return false
		}
		sessions = resp.Sessions
		return slices.ContainsFunc(sessions, func(s *castv1.Session) bool { return s.Cwd == cwd })
	})
	for _, s := range sessions {
		if s.Cwd != cwd {
			t.Errorf("adopted session %s of %s (origin %v): not the user's", s.Id, s.Cwd, s.Origin)
		}
	}
}
