package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/runner"
)

func testAgent(t *testing.T) *Daemon {
	return &Daemon{cfg: Config{CastBin: "/opt/cast", ControlPlane: "127.0.0.1:7000", DataDir: t.TempDir()}, lg: zap.NewNop()}
}

// Gemini: cast joins the settings the agents config wrote, an allowlist of
// servers learns its name, and the file names no session.
func TestGeminiMCPMergesSettings(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	orig := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"mcp":{"allowed":["mine"]},"mcpServers":{"mine":{"command":"x"}}}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	turn := runner.Turn{Agent: "gemini", Home: t.TempDir(), Env: []string{"HOME=" + home}}
	if err := testAgent(t).registerMCP(&turn, "s1"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var got struct {
		Security   map[string]any             `json:"security"`
		MCP        struct{ Allowed []string } `json:"mcp"`
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
			Trust   bool
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.MCPServers["cast"]
	if got.Security == nil || got.MCPServers["mine"].Command != "x" || strings.Join(got.MCP.Allowed, ",") != "mine,cast" {
		t.Fatalf("existing settings lost:\n%s", b)
	}
	if c.Command != "/opt/cast" || strings.Join(c.Args, " ") != "mcp --tools history" || !c.Trust || c.Env["CAST_SESSION"] != "$CAST_SESSION" {
		t.Fatalf("cast server:\n%s", b)
	}
	if strings.Contains(string(b), "s1") {
		t.Fatal("the shared settings file names a session")
	}
	// Settings gemini reads with comments are left alone.
	jsonc := "{ // mine\n}"
	_ = os.WriteFile(path, []byte(jsonc), 0o600)
	if err := testAgent(t).registerMCP(&turn, "s1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != jsonc {
		t.Fatalf("commented settings rewritten:\n%s", b)
	}
}

// The user's own gemini (a shared home): its settings file is left as it
// is, and cast's server goes in a system-defaults file of cast's own,
// named in the turn's environment, that carries over the machine's own
// system defaults. Gemini reads such a file only when root owns it and
// every folder above it: with a data dir under /tmp (anyone can write
// there) the turn runs without it.
func TestGeminiMCPLeavesUserSettings(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	mine := `{"mcpServers":{"mine":{"command":"x"}}}`
	if err := os.WriteFile(path, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := agenttest.RootOnlyDir(t)
	machine := ""
	if secure != "" {
		machine = filepath.Join(secure, "machine-defaults.json")
		if err := os.WriteFile(machine, []byte(`{"mcpServers":{"corp":{"command":"y"}},"ui":{"theme":"corp"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, dataDir string
		registered    bool
	}{
		{"data dir under /tmp", t.TempDir(), false},
		{"root-only data dir", filepath.Join(secure, "data"), secure != ""},
	} {
		if tc.name == "root-only data dir" && secure == "" {
			continue // not root: no folder gemini would trust can be made
		}
		a := testAgent(t)
		a.cfg.DataDir = tc.dataDir
		turn := runner.Turn{Agent: "gemini", Home: home, UserEnv: []string{"HOME=" + home, gemini.SystemDefaultsEnv + "=" + machine}}
		if err := a.registerMCP(&turn, "s1"); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != mine || len(turn.Args) != 0 {
			t.Fatalf("%s: user settings %s, args %q", tc.name, b, turn.Args)
		}
		got := runner.EnvValue(turn.Env, gemini.SystemDefaultsEnv)
		if (got != "") != tc.registered {
			t.Fatalf("%s: %s=%q", tc.name, gemini.SystemDefaultsEnv, got)
		}
		if !tc.registered {
			continue
		}
		b, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		var defaults struct {
			MCPServers map[string]struct{ Command string } `json:"mcpServers"`
			UI         map[string]string                   `json:"ui"`
		}
		if err := json.Unmarshal(b, &defaults); err != nil {
			t.Fatal(err)
		}
		if defaults.MCPServers["cast"].Command != "/opt/cast" || defaults.MCPServers["corp"].Command != "y" || defaults.UI["theme"] != "corp" || strings.Contains(string(b), "s1") {
			t.Fatalf("%s: system defaults:\n%s", tc.name, b)
		}
	}
}

// Claude: the MCP config is a file of cast's own, named on the command
// line; nothing is written into the agent's (maybe the user's) home.
func TestClaudeMCPConfigOutsideHome(t *testing.T) {
	a := testAgent(t)
	home := t.TempDir()
	turn := runner.Turn{Agent: "claude", Home: home, UserEnv: []string{"HOME=" + home}}
	if err := a.registerMCP(&turn, "s1"); err != nil {
		t.Fatal(err)
	}
	if len(turn.Args) < 2 || turn.Args[0] != "--mcp-config" || !strings.HasPrefix(turn.Args[1], a.cfg.DataDir) {
		t.Fatalf("args %q", turn.Args)
	}
	if fi, err := os.Stat(turn.Args[1]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mcp config: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("home written: %v", ents)
	}
}

// OpenCode: cast joins content the agents config put in
// OPENCODE_CONFIG_CONTENT, with this turn's session.
func TestOpenCodeMCPMergesContent(t *testing.T) {
	turn := runner.Turn{Agent: "opencode", Home: t.TempDir(), Env: []string{`OPENCODE_CONFIG_CONTENT={"model":"fake/m"}`}}
	if err := testAgent(t).registerMCP(&turn, "s1"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(runner.EnvValue(turn.Env, "OPENCODE_CONFIG_CONTENT")), &got); err != nil {
		t.Fatal(err)
	}
	c, _ := got["mcp"].(map[string]any)["cast"].(map[string]any)
	env, _ := c["environment"].(map[string]any)
	if got["model"] != "fake/m" || c["type"] != "local" || env["CAST_SESSION"] != "s1" || env["CAST_ADDR"] != "127.0.0.1:7000" {
		t.Fatalf("OPENCODE_CONFIG_CONTENT: %v", got)
	}
}

// pi: the extension goes into cast's own folder, private, is loaded
// with -e, declares the MCP tool's schema, and quotes the binary path as a
// literal (a path with quotes cannot break out of the source).
func TestPiHistoryExtension(t *testing.T) {
	a := testAgent(t)
	a.cfg.CastBin = `/opt/ca"st`
	turn := runner.Turn{Agent: "pi", Home: t.TempDir()}
	if err := a.registerMCP(&turn, "s1"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.mcpDir(), "pi-cast-history.ts")
	if strings.Join(turn.Args, " ") != "-e "+path {
		t.Fatalf("args %q", turn.Args)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("extension file: %v %v", fi, err)
	}
	src, _ := os.ReadFile(path)
	for _, want := range []string{`const castBin = "/opt/ca\"st";`, `name: "cast_history"`, `"before_seq"`, `["mcp", "call", "history",`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("extension lacks %s:\n%s", want, src)
		}
	}
	if strings.Contains(string(src), "s1") {
		t.Error("the extension names a session; it must come from the environment")
	}
}

// The dev setup finds cast when it is built after the start (`go run`,
// then the README's `go build -o bin/`): looked up at each turn, in the
// working directory's bin/ too.
func TestCastBinFoundLate(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	t.Setenv("PATH", t.TempDir())
	a := testAgent(t)
	a.cfg.CastBin, a.cfg.FindCastBin = "", true
	if got := a.castBin(); got != "" {
		t.Fatalf("found %q before it exists", got)
	}
	bin := filepath.Join(wd, "bin", "cast")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := a.castBin(); got != bin {
		t.Fatalf("castBin %q, want %q", got, bin)
	}
	a.cfg.FindCastBin = false // a node: only what it was given
	if got := a.castBin(); got != "" {
		t.Fatalf("node without --cast-bin found %q", got)
	}
}
