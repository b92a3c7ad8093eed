package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// twoNodeRig is issue 23's setup: a control plane over TLS and two real
// node processes, each with its own HOME and its own agents' HOMEs,
// whose real CLIs talk to one fake model:
//   - laptop, joined with `cast node join` under the laptop user's
//     context (which then names it), has claude;
//   - build1 (its name sorts first) has claude and pi, and maps the
//     laptop's checkout root to its own (--map-path laptopSrc=buildSrc).
//
// laptop runs cast as the laptop's user (her context: node laptop); the
// admin's cast (env-only credentials) names no node.
type twoNodeRig struct {
	*mtlsRig
	fake                *fakemodel.Server
	c                   *client.Client // the admin's
	laptop              cli
	laptopConfig        string // the laptop user's cast config file
	laptopSrc, buildSrc string
	procs               map[string]*testharness.Proc
	homes               map[string]string            // node -> its process's HOME
	agentHomes          map[string]map[string]string // node -> agent -> the agent's HOME
	opts                twoNodeOpts
}

// twoNodeOpts change a twoNodeRig for one test.
type twoNodeOpts struct {
	cpArgs   []string            // the control plane's flags
	nodeArgs []string            // both nodes' flags
	agents   map[string][]string // node -> its agents (default: twoNodeAgents)
	// edit changes agent's entry of node's --agents-config (its JSON form).
	edit func(r *twoNodeRig, node, agent string, setup map[string]any)
}

// twoNodeAgents are the agents each node of a twoNodeRig has by default.
var twoNodeAgents = map[string][]string{"laptop": {"claude"}, "build1": {"claude", "pi"}}

func newTwoNodeRig(t *testing.T) *twoNodeRig { return newTwoNodeRigWith(t, twoNodeOpts{}) }

func newTwoNodeRigWith(t *testing.T, o twoNodeOpts) *twoNodeRig {
	if o.agents == nil {
		o.agents = twoNodeAgents
	}
	// Node certificates for the test's length: the mTLS rig's 8 s ones
	// reconnect each node's stream every few seconds.
	r := &twoNodeRig{mtlsRig: newMTLSRig(t, append([]string{"--node-cert-ttl", "1h"}, o.cpArgs...)...), fake: fakemodel.Start(t), opts: o,
		procs: map[string]*testharness.Proc{}, homes: map[string]string{}, agentHomes: map[string]map[string]string{}}
	root := t.TempDir()
	r.laptopSrc, r.buildSrc = filepath.Join(root, "laptop", "src"), filepath.Join(root, "build1", "src")
	c, err := client.Context{Addr: r.addr, CA: r.caFile, Token: r.token}.Dial()
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	r.c = c

	// The laptop user's context (no node yet); `cast node join` on the
	// laptop writes node: laptop into it.
	conf := t.TempDir()
	r.laptopConfig = filepath.Join(conf, "cast", "config.yaml")
	must(t, client.SetContext(r.laptopConfig, "work", client.Context{Addr: r.addr, CA: r.caFile, Token: r.token}))
	r.laptop = cli{t: t, bin: filepath.Join(r.bins, "cast"), env: append(append([]string{}, noHarnessAuth...),
		"CAST_INSECURE=", "CAST_ADDR=", "CAST_CACERT=", "CAST_CONTEXT=", "XDG_CONFIG_HOME="+conf)}
	join := strings.TrimSpace(r.admin.must("node", "token", "create", "--ttl", "5m"))
	_, said, code := r.laptop.run("node", "join", "--join-token", join, "--ca-pin", r.pin, "--name", "laptop", "--data-dir", filepath.Join(r.dir, "node-laptop"))
	if want := "sessions made on this machine without --node go to node laptop (context work in " + r.laptopConfig + ")\n"; code != 0 || !strings.HasSuffix(said, want) {
		t.Fatalf("cast node join: exit %d, stderr %q; want it to end %q", code, said, want)
	}
	r.start("laptop")
	build := strings.TrimSpace(r.admin.must("node", "token", "create", "--ttl", "5m"))
	r.start("build1", "--join-token", build, "--map-path", r.laptopSrc+"="+r.buildSrc)
	r.admin.waitNode("laptop", true)
	r.admin.waitNode("build1", true)
	// First at cleanup: no turn is left running. A CLI a node started is
	// in its own process group and outlives the node's kill -9, writing
	// into the test's folders while they are removed.
	t.Cleanup(func() {
		testharness.WaitFor(t, 2*time.Minute, "no session's turn running", func() bool {
			list, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{IncludeSubagents: true, IncludeArchived: true})
			return err == nil && !slices.ContainsFunc(list.Sessions, func(s *castv1.Session) bool {
				return s.State == castv1.SessionState_SESSION_STATE_RUNNING
			})
		})
	})
	return r
}

// start starts node name's process with its own HOME and its agents.
func (r *twoNodeRig) start(name string, args ...string) {
	cfg, homes := agentsConfig(r.t, r.fake.URL, nil, r.opts.agents[name]...)
	r.homes[name], r.agentHomes[name] = r.t.TempDir(), homes
	if r.opts.edit != nil {
		for _, agent := range r.opts.agents[name] {
			editAgentsConfig(r.t, cfg, agent, func(setup map[string]any) { r.opts.edit(r, name, agent, setup) })
		}
	}
	r.procs[name], _ = r.nodeWith(name, cfg, []string{"HOME=" + r.homes[name]}, append(args, r.opts.nodeArgs...)...)
}
