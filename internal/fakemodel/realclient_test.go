package fakemodel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// TestRealClients drives every pinned CLI through one shell tool call against
// the fake: the fake must speak each CLI's wire protocol well enough that the
// tool runs for real and its output comes back to the model.
func TestRealClients(t *testing.T) {
	prompt := "please TOOLCALL now CMD[echo tool-ran-ok]"
	tests := []struct {
		agent string
		args  []string
	}{
		{"claude", []string{"-p", prompt, "--allowedTools", "Bash"}},
		{"codex", []string{"exec", "--skip-git-repo-check", prompt}},
		{"gemini", []string{"--yolo", "-p", prompt}},
		{"pi", []string{"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel, "-p", prompt}},
		{"opencode", []string{"run", prompt}},
	}
	for _, tc := range tests {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			fake.SetStrict(true) // pairing must be what a real API accepts
			bin := agenttest.Bin(t, tc.agent)
			home, env := agenttest.Env(t, tc.agent, fake.URL)
			res := agenttest.MustRun(t, context.Background(), bin, tc.args, env, home)
			turns := fake.Turns()
			if len(turns) < 2 {
				t.Fatalf("%d turns reached the fake, want 2 (tool call, then its result)\nstdout: %s\nstderr: %s", len(turns), res.Stdout, res.Stderr)
			}
			var result *fakemodel.Item
			for _, it := range turns[len(turns)-1].Items {
				if it.Kind == fakemodel.KindToolResult {
					result = &it
				}
			}
			if result == nil || !strings.Contains(result.Text, "tool-ran-ok") {
				t.Fatalf("the tool's output did not reach the model; last request items:\n%v", turns[len(turns)-1].Items)
			}
			if !strings.Contains(res.Stdout, "FAKE: tool said") {
				t.Errorf("final answer missing from stdout: %s", res.Stdout)
			}
		})
	}
}
