package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/testharness"
)

// agentJSON is one agent of `cast nodes --json`.
type agentJSON struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Path     string `json:"path"`
	Ready    bool   `json:"ready"`
	Status   string `json:"status"`
	Home     string `json:"home"`
	AgentDir string `json:"agent_dir"`
	Probed   bool   `json:"probed"`
}

// node --probe: two real node processes with the user's own Claude (no
// --isolated-homes), each its own HOME. On "in" Claude has a key for the
// fake model and answers the probe; on "out" it has only the empty {}
// .credentials.json the real claude refuses, and READY says no with
// Claude's own words. The probe really reached the model, and it leaves no
// native session in either user's ~/.claude (nor its scratch folder).
func TestNodeProbeReadiness(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	srv := testharness.StartControlPlane(t, nil)
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + srv.Addr(), "HOME=" + t.TempDir()}}
	bin := agenttest.Bin(t, "claude")
	cfgPath := filepath.Join(t.TempDir(), "agents.json")
	cfg, err := json.Marshal(map[string]any{"claude": map[string]any{"bin": bin}})
	must(t, err)
	must(t, os.WriteFile(cfgPath, cfg, 0o600))

	inHome, inEnv := agenttest.Env(t, "claude", fake.URL)
	outHome, outEnv := agenttest.Env(t, "claude", fake.URL)
	outEnv = slices.DeleteFunc(outEnv, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
	outEnv = append(outEnv, "ANTHROPIC_API_KEY=")
	must(t, os.WriteFile(filepath.Join(agenttest.NativeHome(outHome, "claude"), ".credentials.json"), []byte("{}"), 0o600))
	dataDirs := map[string]string{}
	for name, env := range map[string][]string{"in": inEnv, "out": outEnv} {
		dataDirs[name] = t.TempDir()
		testharness.StartProcEnv(t, env, filepath.Join(testharness.Binaries(t), "node"), "--controlplane", srv.Addr(),
			"--data-dir", dataDirs[name], "--name", name, "--agents-config", cfgPath, "--agent-checks=false", "--probe")
	}

	var got map[string]agentJSON
	testharness.WaitFor(t, 4*time.Minute, "both nodes' claude probed", func() bool {
		out, _, code := c.run("nodes", "--json")
		var v struct {
			Nodes []struct {
				Name   string      `json:"name"`
				Agents []agentJSON `json:"agents"`
			} `json:"nodes"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			return false
		}
		got = map[string]agentJSON{}
		for _, n := range v.Nodes {
			for _, a := range n.Agents {
				got[n.Name] = a
			}
		}
		return got["in"].Probed && got["out"].Probed
	})
	version := agents.InstalledVersion(bin)
	inDir, outDir := agenttest.NativeHome(inHome, "claude"), agenttest.NativeHome(outHome, "claude")
	want := map[string]agentJSON{
		"in": {Name: "claude", Version: version, Path: bin, Ready: true, Home: inHome, AgentDir: inDir, Probed: true,
			Status: "probed: answered (key in its environment (ANTHROPIC_API_KEY))"},
		"out": {Name: "claude", Version: version, Path: bin, Home: outHome, AgentDir: outDir, Probed: true,
			Status: "probed: Not logged in · Please run /login"},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("cast nodes --json, node %s's claude:\n got %+v\nwant %+v", name, got[name], w)
		}
	}
	out := c.must("nodes")
	for _, line := range []string{
		"in claude " + version + " yes probed: answered (key in its environment (ANTHROPIC_API_KEY))",
		"out claude " + version + " no probed: Not logged in · Please run /login",
	} {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.Join(strings.Fields(l), " ") == line }) {
			t.Errorf("cast nodes does not show %q:\n%s", line, out)
		}
	}

	asked := 0
	for _, r := range fake.Turns() {
		if strings.Contains(string(r.Body), runner.ProbePrompt) {
			asked++
		}
	}
	if asked == 0 {
		t.Errorf("no probe reached the model (%d requests)", len(fake.Turns()))
	}
	for _, dir := range []string{inDir, outDir} {
		var left []string
		_ = filepath.WalkDir(filepath.Join(dir, "projects"), func(p string, d os.DirEntry, err error) error {
			if err == nil && p != filepath.Join(dir, "projects") {
				left = append(left, p)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("the probe left native session files in %s: %v", dir, left)
		}
	}
	for name, d := range dataDirs {
		if left, _ := os.ReadDir(filepath.Join(d, "probe")); len(left) > 0 {
			t.Errorf("node %s's probe folder keeps %d entries", name, len(left))
		}
	}
}

// `cast nodes --probe` asks a running node that was started without
// --probe to probe its agents now, over its stream: the real Claude
// answers the fake model, and READY says so, then and in `cast nodes`.
func TestNodesProbeAsksARunningNode(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	before := r.fake.Turns()
	out, errOut, code := r.cast("", "nodes")
	if code != 0 || strings.Contains(out, "probed") {
		t.Fatalf("cast nodes before any probe: exit %d, out %q, err %q", code, out, errOut)
	}
	out, errOut, code = r.cast("", "nodes", "--probe")
	version := agents.InstalledVersion(agenttest.Bin(t, "claude"))
	probedLine := func(out string) bool {
		return slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			return strings.HasPrefix(strings.Join(strings.Fields(l), " "), "worker claude "+version+" yes probed: answered")
		})
	}
	if code != 0 || errOut != "" || !probedLine(out) {
		t.Fatalf("cast nodes --probe: exit %d, err %q, out\n%s\nwant a line `worker claude %s yes probed: answered`", code, errOut, out, version)
	}
	asked := 0
	for _, req := range r.fake.Turns()[len(before):] {
		if strings.Contains(string(req.Body), runner.ProbePrompt) {
			asked++
		}
	}
	if asked == 0 {
		t.Fatal("cast nodes --probe: no probe reached the model")
	}
	// The node advertised it: a plain `cast nodes` shows it too.
	testharness.WaitFor(t, 30*time.Second, "cast nodes showing the probe", func() bool {
		out, _, code := r.cast("", "nodes")
		return code == 0 && probedLine(out)
	})
	if left, _ := os.ReadDir(filepath.Join(r.dataDir, "probe")); len(left) > 0 {
		t.Errorf("the node's probe folder keeps %d entries", len(left))
	}
}
