package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/runner"
)

// Readiness looks for a login where the agent's turns would: a credential
// file in its folder or a key in its environment; the version comes from
// the npm package the launcher belongs to.
func TestReadiness(t *testing.T) {
	home := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".claude", ".credentials.json"), `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","scopes":["user:inference"]}}`)
	mods := filepath.Join(t.TempDir(), "node_modules")
	write(filepath.Join(mods, "@anthropic-ai", "claude-code", "package.json"), `{"name":"@anthropic-ai/claude-code","version":"2.1.197"}`)
	write(filepath.Join(mods, "@anthropic-ai", "claude-code", "cli.js"), "")
	if err := os.Chmod(filepath.Join(mods, "@anthropic-ai", "claude-code", "cli.js"), 0o700); err != nil { // a launcher npm installed
		t.Fatal(err)
	}
	bin := filepath.Join(mods, ".bin", "claude")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../@anthropic-ai/claude-code/cli.js", bin); err != nil {
		t.Fatal(err)
	}
	// An unscoped package whose launcher sits in its bin/ (opencode-ai).
	write(filepath.Join(mods, "opencode-ai", "package.json"), `{"version":"1.18.33"}`)
	write(filepath.Join(mods, "opencode-ai", "bin", "opencode"), "")
	if got := agents.InstalledVersion(filepath.Join(mods, "opencode-ai", "bin", "opencode")); got != "1.18.33" {
		t.Errorf("opencode version %q", got)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.UserEnv = "n1", t.TempDir(), []string{"HOME=" + home, "OPENAI_API_KEY=sk-x"}
	tests := []struct {
		agent, bin string
		ready      bool
		version    string
		status     string
	}{
		{"claude", bin, true, "2.1.197", "logged in (" + filepath.Join(home, ".claude", ".credentials.json") + ")"},
		{"codex", "/usr/bin/true", true, "", "key in its environment (OPENAI_API_KEY)"},
		{"gemini", "/usr/bin/true", false, "", "no login found in " + filepath.Join(home, ".gemini") + " (no auth method"},
		{"pi", "", false, "", "binary not found"},
	}
	for _, tc := range tests {
		got := cfg.readiness(tc.agent, tc.bin)
		if got.Ready != tc.ready || got.Version != tc.version || !strings.HasPrefix(got.Status, tc.status) {
			t.Errorf("%s: ready %v version %q status %q; want %v %q %q…", tc.agent, got.Ready, got.Version, got.Status, tc.ready, tc.version, tc.status)
		}
	}
	// A key named in the agent's settings counts (Claude's apiKeyHelper).
	write(filepath.Join(home, ".claude", "settings.json"), `{"apiKeyHelper": "~/bin/key"}`)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// An empty {} .credentials.json is no login (claude says "Not
	// logged in" on it): the settings' key is what counts.
	write(filepath.Join(home, ".claude", ".credentials.json"), "{}")
	if got := cfg.readiness("claude", bin); !got.Ready || !strings.Contains(got.Status, "apiKeyHelper") {
		t.Errorf("claude with {} credentials and apiKeyHelper: %v %q", got.Ready, got.Status)
	}
	must(os.Remove(filepath.Join(home, ".claude", "settings.json")))
	if got := cfg.readiness("claude", bin); got.Ready {
		t.Errorf("claude with only a {} .credentials.json is ready: %q", got.Status)
	}
	write(filepath.Join(home, ".claude", "settings.json"), `{"apiKeyHelper": "~/bin/key"}`)
	must(os.Remove(filepath.Join(home, ".claude", ".credentials.json")))
	if got := cfg.readiness("claude", bin); !got.Ready || !strings.Contains(got.Status, "apiKeyHelper") {
		t.Errorf("claude with apiKeyHelper: %v %q", got.Ready, got.Status)
	}
	// What the agents' own CLIs accept (agents.Agent.FindLogin): Gemini's
	// key in ~/.gemini/.env, which its turns load; not the empty {}
	// auth.json pi writes itself.
	write(filepath.Join(home, ".gemini", ".env"), "GEMINI_API_KEY=from-dot-env\n")
	if got := cfg.readiness("gemini", "/usr/bin/true"); !got.Ready || got.Status != "key in "+filepath.Join(home, ".gemini", ".env")+" (GEMINI_API_KEY)" {
		t.Errorf("gemini with its key in ~/.gemini/.env: %v %q", got.Ready, got.Status)
	}
	write(filepath.Join(home, ".pi", "agent", "auth.json"), "{}")
	cfg.UserEnv = []string{"HOME=" + home} // pi would take OPENAI_API_KEY
	if got := cfg.readiness("pi", "/usr/bin/true"); got.Ready || !strings.HasPrefix(got.Status, "no login found in "+filepath.Join(home, ".pi", "agent")+": run `pi` and /login") {
		t.Errorf("pi with an empty auth.json: %v %q", got.Ready, got.Status)
	}
	// Isolated, the user's login is not the agent's: the advice says so.
	cfg.IsolatedHomes = true
	if got := cfg.readiness("claude", bin); got.Ready || !strings.Contains(got.Status, "set ANTHROPIC_API_KEY in the node's agents config") {
		t.Errorf("isolated claude: %v %q", got.Ready, got.Status)
	}
}

// A not-logged-in turn says which agent on which node and what to run.
func TestLoginAdvice(t *testing.T) {
	cfg := Config{Name: "laptop", DataDir: "/d", UserEnv: []string{"HOME=/home/me"}}
	own := cfg.newTurn("claude", cfg.agentSetup("claude"), nil)
	got := cfg.loginAdvice(own, "Not logged in · Please run /login")
	want := "claude is not logged in on node laptop: run `claude` and /login, or set ANTHROPIC_API_KEY in the node's agents config (claude said: Not logged in · Please run /login)"
	if got != want {
		t.Errorf("own:\n got %s\nwant %s", got, want)
	}
	cfg.IsolatedHomes = true
	iso := cfg.newTurn("gemini", cfg.agentSetup("gemini"), nil)
	if got := cfg.loginAdvice(iso, ""); !strings.Contains(got, "its own home /d/agents/gemini") || !strings.Contains(got, "GEMINI_API_KEY") || !strings.Contains(got, "--isolated-homes") {
		t.Errorf("isolated: %s", got)
	}
}

// A missing CLI says how to install it.
func TestInstallAdvice(t *testing.T) {
	cfg := Config{Name: "laptop"}
	got := cfg.installAdvice(runner.Turn{Agent: "codex"}, `exec: "codex": executable file not found in $PATH`)
	if !strings.HasPrefix(got, "codex is not installed on node laptop (binary not found: exec:") || !strings.HasSuffix(got, `: install it (npm i -g @openai/codex), or set "bin" for it in the node's agents config`) {
		t.Errorf("advice: %s", got)
	}
}

// An agent whose CLI is not there is never ready, whatever is known of its
// login. One with no login check (Muse) was reported ready, "binary found
// (no login check known)", from a "bin" in the agents config that did not
// exist, and `controlplane --dev`'s ready line said to try `cast new
// --agent muse`. Each agent here has a key in its turns' environment too:
// only the missing CLI keeps it from being ready. All are still listed
// (the node advertises them, so their sessions can be placed on it).
func TestReadinessNeedsTheCLI(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-agent-cli")
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.AgentBins = "n1", t.TempDir(), nil
	cfg.UserEnv, cfg.Agents = []string{"HOME=" + t.TempDir()}, map[string]AgentSetup{}
	for _, name := range agents.Names() {
		a, _ := agents.Lookup(name)
		for _, k := range a.Login.Env {
			cfg.UserEnv = append(cfg.UserEnv, k+"=sk-x")
		}
		cfg.Agents[name] = AgentSetup{Bin: filepath.Join(missing, a.Binary)}
	}
	got := cfg.Readiness()
	if len(got) != len(agents.Names()) {
		t.Fatalf("%d agents listed, want all %d", len(got), len(agents.Names()))
	}
	for _, in := range got {
		if in.Ready || !strings.HasPrefix(in.Status, "binary not found") {
			t.Errorf("%s with its CLI missing: ready %v, status %q", in.Name, in.Ready, in.Status)
		}
	}
}
