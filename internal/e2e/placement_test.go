package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/testharness"
)

// placementRule is README's "Where a session runs", sentence by sentence;
// TestPlacementRule checks the README says exactly this and shows each
// sentence with real processes.
var placementRule = []string{
	"A session made without `--node` goes to the node on your own machine: the one your context's `node:` names " +
		"(`controlplane --dev` writes it, and so does `cast node join` on the machine it joins).",
	"When that node is down or lacks the agent, it goes to the first node by name that has the agent and answers that your " +
		"folder is there (after that node's `--map-path`), and runs in that node's path for it; when no node does, it is refused, " +
		"naming each node and its answer (an import, which runs nothing, goes to the first node with the agent, else to any node, " +
		"and with no node connected waits for the first to connect).",
	"`--node NAME` always wins: that node is asked the same way and runs in its path for your folder, or the session is refused with its answer; " +
		"a worker runs beside its parent.",
	"`cast new` prints the id on stdout and where it went on stderr: `session ID on node NAME`, with `in PATH` when the node's path differs.",
}

// On the two-node rig (twoNodeRig: build1's name sorts first, and the old
// rule sent every session made on the laptop there, with the laptop's
// folder as cwd).
func TestPlacementRule(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(testharness.RepoRoot(t), "README.md"))
	must(t, err)
	flat := strings.Join(strings.Fields(string(readme)), " ")
	for _, s := range placementRule {
		if !strings.Contains(flat, s) {
			t.Fatalf("README does not state the placement rule as tested; missing:\n%s", s)
		}
	}

	r := newTwoNodeRig(t)
	laptop, laptopSrc, buildSrc := r.laptop, r.laptopSrc, r.buildSrc
	app, onlyHere, buildApp := filepath.Join(laptopSrc, "app"), filepath.Join(laptopSrc, "only-here"), filepath.Join(buildSrc, "app")
	for _, d := range []string{app, onlyHere, buildApp} {
		must(t, os.MkdirAll(d, 0o755))
	}

	// newAt runs `cast new` in dir and checks stdout is the id alone and
	// stderr the placement line.
	newAt := func(c cli, dir, node, at string, args ...string) string {
		t.Helper()
		out, errOut, code := c.run(append([]string{"new", "--agent", "claude", "--cwd", dir}, args...)...)
		id := strings.TrimSpace(out)
		want := "session " + id + " on node " + node + "\n"
		if at != "" {
			want = "session " + id + " on node " + node + " in " + at + "\n"
		}
		if code != 0 || out != id+"\n" || errOut != want {
			t.Fatalf("cast new --cwd %s %v: exit %d, stdout %q, stderr %q; want stderr %q", dir, args, code, out, errOut, want)
		}
		var got struct{ Node, Cwd string }
		must(t, json.Unmarshal([]byte(r.admin.must("get", id, "--json")), &got))
		if wantCwd := map[bool]string{true: at, false: dir}[at != ""]; got.Node != node || got.Cwd != wantCwd {
			t.Fatalf("session %s is on %s in %s; want %s in %s", id, got.Node, got.Cwd, node, wantCwd)
		}
		return id
	}

	// Sentence 1: the laptop's own node, named by its context.
	newAt(laptop, app, "laptop", "")
	// Sentence 3: --node wins, in that node's path for the folder (before,
	// the laptop's folder was sent as it is); a worker goes beside its
	// parent; a --node without the folder is refused with its answer,
	// storing nothing.
	onBuild := newAt(laptop, app, "build1", buildApp, "--node", "build1")
	before := countSessions(r.admin)
	_, errOut, code := laptop.run("new", "--agent", "claude", "--cwd", onlyHere, "--node", "build1")
	want := "cast: cannot run on node build1 in " + onlyHere + ": node build1: no folder " + filepath.Join(buildSrc, "only-here") + " here (--map-path of " + onlyHere + "); " +
		"drop --node to run it on a node that has the folder, or map the folder on build1 with node --map-path FROM=TO\n"
	if code != 1 || errOut != want {
		t.Fatalf("cast new --node build1 in a folder build1 lacks: exit %d, stderr\n%q\nwant\n%q", code, errOut, want)
	}
	if after := countSessions(r.admin); after != before {
		t.Fatalf("a refused cast new --node stored a session: %d sessions, %d before", after, before)
	}
	out, _, code := laptop.run("spawn", "--subagent", "--agent", "claude", "-s", onBuild, "a task")
	if code != 0 {
		t.Fatalf("cast spawn: exit %d", code)
	}
	var worker struct{ Node string }
	must(t, json.Unmarshal([]byte(r.admin.must("get", strings.TrimSpace(out), "--json")), &worker))
	if worker.Node != "build1" {
		t.Fatalf("a worker of a build1 session went to %s", worker.Node)
	}

	// Sentence 2, with no node in the context (the admin's env-only
	// credentials): the first node by name with the folder, at its path.
	newAt(r.admin, app, "build1", buildApp)
	newAt(r.admin, onlyHere, "laptop", "") // build1 maps it to a folder it lacks

	// Sentence 2, the laptop's node down.
	if !r.procs["laptop"].Stop(30 * time.Second) {
		t.Log("the laptop node did not stop on SIGTERM; killed")
	}
	r.admin.waitNode("laptop", false)
	newAt(laptop, app, "build1", buildApp)
	before = countSessions(r.admin)
	_, errOut, code = laptop.run("new", "--agent", "claude", "--cwd", onlyHere)
	want = "cast: no connected node with the claude CLI has the folder " + onlyHere + ": this machine's node laptop is not connected; " +
		"node build1: no folder " + filepath.Join(buildSrc, "only-here") + " here (--map-path of " + onlyHere + "); " +
		"run it on a node that has it with --node NAME, or map the folder with node --map-path FROM=TO\n"
	if code != 1 || errOut != want {
		t.Fatalf("cast new in a folder no node has: exit %d, stderr\n%q\nwant\n%q", code, errOut, want)
	}
	if after := countSessions(r.admin); after != before {
		t.Fatalf("a refused cast new stored a session: %d sessions, %d before", after, before)
	}
}

// countSessions counts every session, workers and archived ones too.
func countSessions(c cli) int {
	var ls struct{ Sessions []json.RawMessage }
	must(c.t, json.Unmarshal([]byte(c.must("ls", "--all", "--json")), &ls))
	return len(ls.Sessions)
}

// The setup: `controlplane --dev` on a laptop, then a second node
// joined (build1, its name sorting before the dev node's, with its own
// HOME). The context --dev wrote names its node, so a session made on the
// laptop without --node stays there; before, it went to build1.
func TestPlacementDevContextNamesItsNode(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	home, _ := userHome(t, fake.URL)
	addr := freeAddr(t)
	env := append(userEnv(t, home, addr), "CAST_TOKEN=", "CAST_JOIN_TOKEN=", "CAST_BOOTSTRAP_TOKEN=")
	dev := startUserDev(t, env, addr)
	var pin string
	testharness.WaitFor(t, 60*time.Second, "the dev CA pin in the log", func() bool {
		_, rest, ok := strings.Cut(dev.Output(), `"ca_pin":"`)
		pin, _, _ = strings.Cut(rest, `"`)
		return ok && pin != ""
	})
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: env}
	c.waitNode("devnode", true)
	b, err := os.ReadFile(filepath.Join(home, ".config", "cast", "config.yaml"))
	must(t, err)
	var cfg client.Config
	must(t, yaml.Unmarshal(b, &cfg))
	if ctx := cfg.Contexts["dev"]; ctx == nil || ctx.Node != "devnode" {
		t.Fatalf("the dev context does not name the dev node:\n%s", b)
	}
	join := strings.TrimSpace(c.must("node", "token", "create", "--ttl", "5m"))
	testharness.StartProcEnv(t, append(append([]string{}, noHarnessAuth...), "CAST_INSECURE="), filepath.Join(testharness.Binaries(t), "node"),
		"--controlplane", addr, "--ca-pin", pin, "--join-token", join, "--name", "build1", "--data-dir", t.TempDir(),
		"--cast-bin", "", "--agents-config", missingAgentsConfig(t))
	c.waitNode("build1", true)
	dir := t.TempDir()
	out, errOut, code := c.run("new", "--agent", "claude", "--cwd", dir)
	id := strings.TrimSpace(out)
	if code != 0 || errOut != "session "+id+" on node devnode\n" {
		t.Fatalf("cast new on the dev machine: exit %d, stdout %q, stderr %q; want it on devnode", code, out, errOut)
	}
}
