package node

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/runner"
	"go.uber.org/zap"
)

func TestLoadAgentsConfigAccounts(t *testing.T) {
	cases := []struct {
		name, json, err string
	}{
		{"account", `{"claude":{"env":["A=1"],"accounts":{"work":{"env":["ANTHROPIC_API_KEY=k"]}}}}`, ""},
		{"bad account name", `{"claude":{"accounts":{"../x":{}}}}`, "account name"},
		{"relative account home", `{"claude":{"accounts":{"work":{"home":"rel"}}}}`, "must be absolute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "agents.json")
			if err := os.WriteFile(p, []byte(tc.json), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadAgentsConfig(p)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestAccountSetup(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.IsolatedHomes = "n1", "/data", true
	cfg.Agents = map[string]AgentSetup{"claude": {Env: []string{"A=1", "K=default", "CLAUDE_CONFIG_DIR=/shared/.claude", "XDG_DATA_HOME=/shared/data"},
		Accounts: map[string]AccountSetup{"work": {Env: []string{"K=work"}}, "home": {Home: "/h", Env: nil}}}}
	cases := []struct {
		account, home string
		env           []string
		err           string
	}{
		{"", "/data/agents/claude", []string{"A=1", "K=default", "CLAUDE_CONFIG_DIR=/shared/.claude", "XDG_DATA_HOME=/shared/data"}, ""},
		{"work", "/data/agents/claude@work", []string{"A=1", "K=default", "K=work"}, ""}, // the last K wins in exec
		{"home", "/h", []string{"A=1", "K=default"}, ""},
		{"nope", "", nil, `account "nope" is not set up for claude on node n1`},
	}
	for _, tc := range cases {
		s, err := cfg.accountSetup("claude", tc.account)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.account, err, tc.err)
			}
			continue
		}
		if err != nil || s.Home != tc.home || !slices.Equal(s.Env, tc.env) {
			t.Errorf("%q: %v home %q env %v; want %q %v", tc.account, err, s.Home, s.Env, tc.home, tc.env)
		}
	}
	// The agent's own Env slice is never changed by an account overlay.
	if got := cfg.Agents["claude"].Env; len(got) != 4 || got[1] != "K=default" {
		t.Fatalf("agent env mutated: %v", got)
	}
}

// By default an agent without a home runs as the user has it: the user's
// HOME and environment. Accounts and configured homes stay isolated.
func TestOwnAgentsByDefault(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.UserEnv = "n1", "/data", []string{"HOME=/home/me", "CLAUDE_CONFIG_DIR=/home/me/alt"}
	cfg.Agents = map[string]AgentSetup{"codex": {Home: "/srv/codex"},
		"claude": {Accounts: map[string]AccountSetup{"work": {}}}}
	cases := []struct {
		agent, account, home, agentDir string
		own                            bool
	}{
		{"claude", "", "/home/me", "/home/me/alt", true},
		{"pi", "", "/home/me", "/home/me/.pi/agent", true},
		{"gemini", "", "/home/me", "/home/me/.gemini", true},
		{"opencode", "", "/home/me", "/home/me/.local/share", true},
		{"codex", "", "/srv/codex", "/srv/codex/.codex", false},
		{"claude", "work", "/data/agents/claude@work", "/data/agents/claude@work/.claude", false},
	}
	for _, tc := range cases {
		s, err := cfg.accountSetup(tc.agent, tc.account)
		if err != nil {
			t.Fatal(err)
		}
		turn := cfg.newTurn(tc.agent, s, nil)
		if s.Home != tc.home || (turn.UserEnv != nil) != tc.own || turn.AgentDir() != tc.agentDir {
			t.Errorf("%s@%s: home %q own %v dir %q; want %q %v %q", tc.agent, tc.account, s.Home, turn.UserEnv != nil, turn.AgentDir(), tc.home, tc.own, tc.agentDir)
		}
	}
	cfg.ControlPlane, cfg.UserEnv = "127.0.0.1:1", nil
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--isolated-homes") {
		t.Fatalf("no HOME: %v", err)
	}
	cfg.IsolatedHomes = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// --metrics-listen is HTTPS with the node's certificate (--ca-pin); plain
// HTTP without one needs --insecure.
func TestMetricsListenNeedsTLSOrInsecure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pin      string
		insecure bool
		ok       bool
	}{
		{"TLS", "sha256:" + strings.Repeat("0", 64), false, true},
		{"plaintext", "", false, false},
		{"plaintext, --insecure", "", true, true},
	} {
		cfg := DefaultConfig()
		cfg.ControlPlane, cfg.DataDir, cfg.Name, cfg.IsolatedHomes = "127.0.0.1:1", t.TempDir(), "n1", true
		cfg.MetricsListen, cfg.CAPin, cfg.Insecure = "127.0.0.1:0", tc.pin, tc.insecure
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// Adoption watches each listing agent's own folder as the node runs it
// (the user's, or a configured home), only those --adopt-agents names
// when it names any, and refuses a name it cannot adopt and an interval
// out of bounds.
func TestAdoptConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ControlPlane, cfg.Name, cfg.DataDir = "127.0.0.1:1", "n1", "/data"
	cfg.UserEnv = []string{"HOME=/home/me", "CLAUDE_CONFIG_DIR=/home/me/alt"}
	cfg.Agents = map[string]AgentSetup{"codex": {Home: "/srv/codex"}}
	cfg.Adopt, cfg.AdoptInterval = true, DefaultAdoptInterval
	// OpenCode's sessions are rows its CLI lists: it is watched with the
	// CLI the node runs (here a stand-in executable), with the user's
	// environment.
	bin := filepath.Join(t.TempDir(), "opencode")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: cfg, lg: zap.NewNop(), runner: &runner.Runner{Bins: map[string]string{"opencode": bin}}}
	got := map[string]string{}
	for _, s := range d.adoptSources() {
		got[s.Agent] = s.Home
		if s.Agent == "opencode" && (s.Bin != bin || runner.EnvValue(s.Env, "HOME") != "/home/me") {
			t.Errorf("opencode is listed with %s in %q", s.Bin, s.Env)
		}
	}
	want := map[string]string{"claude": "/home/me/alt", "codex": "/srv/codex/.codex", "gemini": "/home/me/.gemini", "pi": "/home/me/.pi/agent",
		"opencode": "/home/me/.local/share"}
	if !maps.Equal(got, want) {
		t.Fatalf("sources %v, want %v", got, want)
	}
	// Without its CLI, a store agent is left out.
	d.runner.Bins["opencode"] = filepath.Join(t.TempDir(), "missing")
	if s := d.adoptSources(); slices.ContainsFunc(s, func(s adopt.Source) bool { return s.Agent == "opencode" }) {
		t.Fatalf("opencode listed with no CLI: %v", s)
	}
	d.cfg.AdoptAgents = []string{"codex"}
	if s := d.adoptSources(); len(s) != 1 || s[0].Agent != "codex" {
		t.Fatalf("--adopt-agents codex: %v", s)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*Config){
		"an agent whose sessions cast cannot list": func(c *Config) { c.AdoptAgents = []string{"grok"} },
		"an unknown agent":                         func(c *Config) { c.AdoptAgents = []string{"nope"} },
		"a busy interval":                          func(c *Config) { c.AdoptInterval = time.Millisecond },
	} {
		c := cfg
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg.Adopt, cfg.AdoptAgents, cfg.AdoptInterval = false, []string{"nope"}, 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("adoption off: its settings are not checked: %v", err)
	}
}
