package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The user's own Gemini CLI (no --isolated-homes: their HOME, settings and
// login) is offered cast's history tool, and a call to it returns the
// session's own thread, while everything of the user's still applies: the
// auth type in their settings (without it headless gemini refuses to
// start) and their own MCP server, offered beside cast's. Their settings
// file stays byte-identical and nothing is written into the checkout. cast
// adds its server through a system-defaults file of its own, which gemini
// reads only when root owns it and every folder above it: as root the node
// gets a data dir like that (RootOnlyDir); as any other user the node
// cannot, and the turn runs without cast's tool and with the user's.
func TestGeminiHistoryToolInUserHome(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	srv := testharness.StartControlPlane(t, nil)
	home, env := agenttest.Env(t, "gemini", fake.URL)
	settingsPath := filepath.Join(agenttest.NativeHome(home, "gemini"), "settings.json")
	b, err := os.ReadFile(settingsPath)
	must(t, err)
	var settings map[string]any
	must(t, json.Unmarshal(b, &settings))
	settings["mcpServers"] = map[string]any{"mine": map[string]any{
		"command": filepath.Join(testharness.Binaries(t), "cast"), "args": []string{"mcp", "--tools", "history"}, "trust": true}}
	mine, err := json.Marshal(settings)
	must(t, err)
	must(t, os.WriteFile(settingsPath, mine, 0o600))

	dataDir := agenttest.RootOnlyDir(t)
	asRoot := dataDir != ""
	if asRoot {
		probe := filepath.Join(dataDir, "probe.json")
		must(t, os.WriteFile(probe, []byte("{}"), 0o600))
		if err := gemini.CheckSystemFile(probe); err != nil {
			t.Fatalf("running as root, but the test's folder is not one gemini trusts: %v", err)
		}
	} else {
		dataDir = t.TempDir()
	}
	cfgPath := filepath.Join(t.TempDir(), "agents.json")
	// No "home": the node runs the user's own gemini, with its own
	// environment (HOME and the provider variables of env).
	cfg, err := json.Marshal(map[string]any{"gemini": map[string]any{"bin": agenttest.Bin(t, "gemini")}})
	must(t, err)
	must(t, os.WriteFile(cfgPath, cfg, 0o600))
	r := &turnRig{t: t, c: testharness.Dial(t, srv.Addr()), fake: fake, addr: srv.Addr(), homes: map[string]string{"gemini": home}}
	r.nodeArgs = []string{"--controlplane", srv.Addr(), "--data-dir", dataDir, "--name", "worker",
		"--agents-config", cfgPath, "--log-level", "debug"}
	r.startNodeEnv(env...)

	ctx := context.Background()
	cwd := t.TempDir()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "gemini", Cwd: cwd, Text: "first question MARK-G1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	turns := fake.Turns()
	body := string(turns[len(turns)-1].Body)
	if !strings.Contains(body, `"mcp_mine_history"`) {
		t.Fatalf("the user's own MCP server was not offered:\n%s", clipBody(body))
	}
	if got := strings.Contains(body, `"mcp_cast_history"`); got != asRoot {
		t.Fatalf("cast's history tool offered: %v, want %v (node as root: %v):\n%s", got, asRoot, asRoot, clipBody(body))
	}
	if asRoot {
		askHistory(t, r, sess.Id, "mcp_cast_history", "what did you answer first? MARK-G2")
	}
	if after, err := os.ReadFile(settingsPath); err != nil || string(after) != string(mine) {
		t.Fatalf("the user's settings changed (%v):\n%s", err, after)
	}
	if _, err := os.Stat(filepath.Join(cwd, ".gemini")); err == nil {
		t.Fatal(".gemini written into the checkout")
	}
}
