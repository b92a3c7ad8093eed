// Package e2e runs the real binaries: controlplane (--dev and plain), node
// and the cast CLI, as a user would, including kill -9 and restarts. It
// also holds the rules the whole tree is held to: imports and the
// architecture map (deps_test.go), function size (funcsize_test.go) and
// generated code (generated_test.go).
package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

func freeAddr(t *testing.T) string {
	// Below the ephemeral range, never the same twice in this process: a
	// port the kernel picked for a listener on port 0 went, between its
	// close and the control plane's bind, to another test's listener on
	// port 0 (TestWebTimelineResumesLiveUpdates: address already in use).
	return testharness.FreeAddr(t)
}

type cli struct {
	t   *testing.T
	bin string
	env []string
}

func (c cli) run(args ...string) (string, string, int) {
	return testharness.Run(c.t, c.env, c.bin, args...)
}

func (c cli) must(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("cast %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

type nodeJSON struct {
	Name      string   `json:"name"`
	Labels    []string `json:"labels"`
	Connected bool     `json:"connected"`
}

func (c cli) nodes() []nodeJSON {
	out, _, code := c.run("nodes", "--json")
	if code != 0 {
		return nil
	}
	var v struct{ Nodes []nodeJSON }
	_ = json.Unmarshal([]byte(out), &v)
	return v.Nodes
}

func (c cli) waitNode(name string, up bool) nodeJSON {
	c.t.Helper()
	var found nodeJSON
	testharness.WaitFor(c.t, 30*time.Second, fmt.Sprintf("node %s up=%v", name, up), func() bool {
		for _, n := range c.nodes() {
			if n.Name == name && n.Connected == up {
				found = n
				return true
			}
		}
		return false
	})
	return found
}

// startDev runs `controlplane --dev` whose node has every agent at a path
// with no CLI (testharness.MissingAgents): sessions are placed, turns fail.
func startDev(t *testing.T, bins, dataDir, addr string) *testharness.Proc {
	p := testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--dev", "--data-dir", dataDir,
		"--listen", addr, "--metrics-listen", "127.0.0.1:0", "--node-name", "devnode", "--log-format", "json",
		"--node-agents-config", missingAgentsConfig(t))
	return p
}

// devRig is a `controlplane --dev` process with its node connected, and
// the cast CLI pointed at it.
type devRig struct {
	bins, dataDir, addr string
	c                   cli
	dev                 *testharness.Proc
}

func newDevRig(t *testing.T) devRig {
	t.Helper()
	r := devRig{bins: testharness.Binaries(t), dataDir: t.TempDir(), addr: freeAddr(t)}
	r.c = cli{t: t, bin: filepath.Join(r.bins, "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	r.dev = startDev(t, r.bins, r.dataDir, r.addr)
	r.c.waitNode("devnode", true)
	return r
}

// missingAgentsConfig writes an agents config (node --agents-config)
// naming every agent at a path with no CLI.
func missingAgentsConfig(t *testing.T) string {
	setups := map[string]map[string]string{}
	for name, s := range testharness.MissingAgents(t.TempDir()) {
		setups[name] = map[string]string{"bin": s.Bin}
	}
	cfg := filepath.Join(t.TempDir(), "agents.json")
	b, _ := json.Marshal(setups)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The README's main job: `controlplane --dev`, then the documented cast
// commands. A kill -9 of the dev process and a restart keeps every message
// that `cast send` acknowledged.
func TestDevModeKill9KeepsAcknowledgedMessages(t *testing.T) {
	t.Parallel()
	r := newDevRig(t)
	bins, dataDir, addr, c, dev := r.bins, r.dataDir, r.addr, r.c, r.dev

	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(c.must("new", "--agent", "claude", "--json", "hello from e2e")), &created); err != nil || created.ID == "" {
		t.Fatalf("cast new --json: %v %+v", err, created)
	}
	id := created.ID
	if out := c.must("ls"); !strings.Contains(out, id) || !strings.Contains(out, "devnode") {
		t.Fatalf("cast ls:\n%s", out)
	}

	// Send in the background; kill -9 the dev process in the middle.
	var mu sync.Mutex
	var acked []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 40 {
			text := fmt.Sprintf("msg-%02d", i)
			if _, _, code := c.run("send", "-s", id, text, "--timeout", "3s"); code == 0 {
				mu.Lock()
				acked = append(acked, text)
				mu.Unlock()
			}
		}
	}()
	testharness.WaitFor(t, 60*time.Second, "some acknowledged sends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 8
	})
	dev.Kill()
	dev = startDev(t, bins, dataDir, addr) // sends in flight retry into the new process
	<-done
	c.waitNode("devnode", true)

	var read struct {
		Messages []struct {
			Seq  string `json:"seq"`
			Text string `json:"text"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(c.must("read", id, "--json")), &read); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for i, m := range read.Messages {
		if m.Seq != fmt.Sprint(i+1) {
			t.Fatalf("seq %s at position %d", m.Seq, i)
		}
		count[m.Text]++
	}
	if count["hello from e2e"] != 1 {
		t.Fatalf("first message count %d", count["hello from e2e"])
	}
	for _, text := range acked {
		if count[text] != 1 {
			t.Fatalf("acknowledged %q stored %d times after kill -9", text, count[text])
		}
	}
	if len(acked) < 20 {
		t.Fatalf("only %d of 40 sends acknowledged across one restart; the CLI should retry through it", len(acked))
	}
	t.Logf("%d acknowledged across the kill, %d stored", len(acked), len(read.Messages)-1)
	// The documented range form.
	if out := c.must("read", id, "1:1"); !strings.Contains(out, "hello from e2e") {
		t.Fatalf("cast read %s 1:1:\n%s", id, out)
	}
	if !dev.Stop(20 * time.Second) {
		t.Fatal("dev process did not stop on SIGTERM")
	}
}

// A real node process registers with its labels; when it stops
// heartbeating (SIGSTOP, like a sleeping laptop) its lease lapses and it is
// shown down; when it wakes it is up again; SIGTERM marks it down at once.
func TestNodeProcessLabelsLeaseAndShutdown(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	addr := freeAddr(t)
	testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", t.TempDir(), "--listen", addr,
		"--metrics-listen", "", "--node-lease-ttl", "2s", "--node-heartbeat", "500ms")
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr}}
	node := testharness.StartProc(t, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", t.TempDir(),
		"--name", "edge1", "--label", "linux", "--label", "laptop")
	n := c.waitNode("edge1", true)
	if got := strings.Join(n.Labels, ","); !strings.HasPrefix(got, "linux,") || !strings.HasSuffix(got, ",laptop") || strings.Count(got, "linux") != 1 {
		t.Fatalf("labels %q: want os first, hostname, then user labels without duplicates", got)
	}
	node.Signal(syscall.SIGSTOP)
	c.waitNode("edge1", false)
	node.Signal(syscall.SIGCONT)
	c.waitNode("edge1", true)
	if out := c.must("nodes"); !strings.Contains(out, "edge1") || !strings.Contains(out, "up") {
		t.Fatalf("cast nodes:\n%s", out)
	}
	start := time.Now()
	if !node.Stop(10 * time.Second) {
		t.Fatal("node did not stop on SIGTERM")
	}
	c.waitNode("edge1", false)
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Logf("node shown down %s after SIGTERM (lease revoke should be immediate)", d)
	}
}

// CLI errors are one line that says what to do, with exit codes scripts
// can rely on (2: usage, 1: the request failed).
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	addr := freeAddr(t)
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr}}
	_, errOut, code := c.run("ls")
	if code != 1 || !strings.Contains(errOut, "controlplane --dev") {
		t.Fatalf("no control plane: exit %d %q", code, errOut)
	}
	startDev(t, bins, t.TempDir(), addr)
	c.waitNode("devnode", true)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"send", "-s", "abcdefg", ""}, 2, "message is empty"},
		{[]string{"send", "hi"}, 2, "cast send ID MESSAGE"},
		{[]string{"read", "abcdefg"}, 1, "not found; `cast ls`"},
		{[]string{"read", "Bad/Id"}, 2, "malformed"}, // refused before any request
		{[]string{"read", "abcdefg", "9:3"}, 2, "FROM:TO"},
		{[]string{"new", "hi"}, 2, "--agent is required"},
		{[]string{"new", "--agent", "eliza"}, 2, "unknown agent"},
	}
	for _, tc := range tests {
		_, errOut, code := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("cast %v: exit %d, stderr %q; want exit %d containing %q on one line", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
