package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// node --metrics-listen: /healthz answers, /readyz once the node is
// connected, and /metrics counts turns by agent and outcome (every agent
// and outcome at 0 first; here the agent's CLI is missing, so the turn
// ends "binary_not_found") and passes `promtool check metrics`.
func TestNodeMetrics(t *testing.T) {
	t.Parallel()
	cp := testharness.StartControlPlane(t, nil)
	addr := freeAddr(t)
	// Plain HTTP: a plaintext control plane and --insecure (TestMetricsOverTLS
	// has the TLS default).
	testharness.StartNode(t, cp.Addr(), "metered", func(c *node.Config) { c.MetricsListen, c.Insecure = addr, true })
	get := func(path string) (int, []byte) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	testharness.WaitFor(t, 30*time.Second, "the node ready", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{`cast_node_turns_total{agent="claude",outcome="succeeded"} 0`,
		`cast_node_turns_total{agent="codex",outcome="rate_limited"} 0`, `cast_node_turn_duration_seconds_count{agent="gemini",outcome="succeeded"} 0`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics before any turn lacks %s", want)
		}
	}

	c := testharness.Dial(t, cp.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "metered", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: s.Id, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	failed := regexp.MustCompile(`(?m)^cast_node_turns_total\{agent="claude",outcome="binary_not_found"\} (\d+)$`)
	testharness.WaitFor(t, 30*time.Second, "the failed turn counted", func() bool {
		_, body = get("/metrics")
		m := failed.FindSubmatch(body)
		if m == nil {
			return false
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n >= 1
	})
	if !bytes.Contains(body, []byte(`cast_node_turns_total{agent="claude",outcome="succeeded"} 0`)) {
		t.Errorf("a failed turn counted as succeeded")
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// `controlplane --dev` serves its node's metrics too (--node-metrics-listen;
// by default beside the control plane's), with the node's cast_build_info.
func TestDevNodeServesMetrics(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	addr, metrics := freeAddr(t), freeAddr(t)
	testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--dev", "--data-dir", t.TempDir(),
		"--listen", addr, "--metrics-listen", "127.0.0.1:0", "--node-metrics-listen", metrics, "--node-name", "devnode", "--log-format", "json",
		"--node-agents-config", missingAgentsConfig(t))
	var body []byte
	testharness.WaitFor(t, 60*time.Second, "the dev node's /metrics", func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics") // the harness's CAST_INSECURE=1: plain HTTP, as the control plane's
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	})
	for _, want := range []string{"cast_build_info{", `cast_node_turns_total{agent="claude",outcome="succeeded"} 0`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the dev node's /metrics lacks %s", want)
		}
	}
}
