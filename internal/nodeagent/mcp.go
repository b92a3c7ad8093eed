package nodeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/mcpserver"
	"github.com/cast-dev/cast/internal/runner"
)

// mcpName is the server's name in every agent's config; the agents derive
// the tool names the model sees from it (mcp__cast__history,
// mcp_cast_history, cast_history).
const mcpName = "cast"

// historyOnly is `cast mcp` serving just the read-only history tool: the
// permission tool is Claude's --permission-prompt-tool and no other agent
// has a use for it.
var historyOnly = []string{"mcp", "--tools", mcpserver.HistoryTool}

// registerMCP gives the turn's agent cast's MCP server, each in the form
// its CLI reads: flags, environment, or a file of cast's own under the
// node's data dir. Never the user's checkout, and never a file of the
// agent's own: with a shared home those are the user's (their settings,
// their MCP servers), which cast only adds to for the turn.
//
// pi (@mariozechner/pi-coding-agent 0.73) has no MCP client by design (its
// README: "No MCP. ... build an extension"), so it gets the history tool
// through a small extension that calls the MCP tool via `cast mcp call`
// (piext.go).
func (a *Agent) registerMCP(t *runner.Turn, sessionID string) error {
	bin := a.castBin()
	if bin == "" {
		return nil
	}
	switch t.Agent {
	case "claude":
		return a.registerClaudeMCP(t, sessionID, bin)
	case "codex":
		// Codex takes MCP servers as -c config overrides (TOML values).
		t.Args = append(t.Args,
			"-c", "mcp_servers."+mcpName+".command="+strconv.Quote(bin),
			"-c", "mcp_servers."+mcpName+`.args=["mcp","--tools","history"]`,
			"-c", "mcp_servers."+mcpName+".env="+tomlTable(a.castEnv(sessionID)))
	case "gemini":
		return a.registerGeminiMCP(t, bin)
	case "opencode":
		return a.registerOpenCodeMCP(t, sessionID, bin)
	case "pi":
		return a.registerPiHistory(t, bin)
	}
	return nil
}

// registerClaudeMCP gives Claude Code cast's MCP server, with its permission
// tool as the --permission-prompt-tool, so a tool that needs approval waits
// on a person (`cast approve`/`cast deny`) instead of being refused.
func (a *Agent) registerClaudeMCP(t *runner.Turn, sessionID, bin string) error {
	cfg := map[string]any{"mcpServers": map[string]any{mcpName: map[string]any{
		"type": "stdio", "command": bin, "args": []string{"mcp"},
		"env": a.castEnv(sessionID),
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	path := filepath.Join(a.mcpDir(), "claude-"+sessionID+".json")
	if err := writePrivate(path, b); err != nil {
		return err
	}
	// The read-only history tool needs no approval. --allowedTools takes
	// several values, so it stays last.
	t.Args = append(t.Args, "--mcp-config", path, "--permission-prompt-tool", "mcp__"+mcpName+"__"+mcpserver.PermissionTool,
		"--allowedTools", "mcp__"+mcpName+"__"+mcpserver.HistoryTool)
	return nil
}

// registerGeminiMCP adds cast to the mcpServers of an isolated agent's
// ~/.gemini/settings.json, which is cast's own: gemini-cli 0.61 has no flag
// that adds a server. The user's own gemini (a shared home) gets it another
// way (registerGeminiUserMCP): its settings file is the user's and is never
// rewritten. The file is shared by every gemini session of this node,
// so it names no session: gemini expands $VAR in settings from its own
// environment when it loads them, and each turn's environment carries its
// CAST_SESSION and CAST_ADDR. Expanding at load time also survives the
// redaction gemini applies to the environment it hands MCP servers in CI
// (GITHUB_SHA set), which would drop an unknown CAST_* variable.
//
// trust lets the history tool run headless without an approval prompt
// (gemini allows mcp_cast_* when the folder is trusted, which the runner's
// GEMINI_CLI_TRUST_WORKSPACE makes it); `--tools history` keeps that trust
// to the one read-only tool.
func (a *Agent) registerGeminiMCP(t *runner.Turn, bin string) error {
	if t.UserEnv != nil {
		return a.registerGeminiUserMCP(t, bin)
	}
	// Where gemini looks: GEMINI_CLI_HOME, else HOME, as the turn sets them.
	home := runner.EnvValue(t.Env, "GEMINI_CLI_HOME")
	if home == "" {
		home = runner.EnvValue(t.Env, "HOME")
	}
	if home == "" {
		home = t.Home
	}
	path := filepath.Join(home, ".gemini", "settings.json")
	settings := map[string]any{}
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		// gemini tolerates comments in settings.json; rewriting such a
		// file would lose them, so it is left alone and the turn runs
		// without cast's tool rather than failing.
		if err := json.Unmarshal(old, &settings); err != nil {
			a.lg.Warn("gemini settings are not plain JSON; cast MCP server not registered", zap.String("path", path), zap.Error(err))
			return nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	servers, _ := settings["mcpServers"].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	servers[mcpName] = a.geminiServer(bin)
	settings["mcpServers"] = servers
	// An allowlist of servers (mcp.allowed) would drop cast silently.
	if m, ok := settings["mcp"].(map[string]any); ok {
		if allowed, ok := m["allowed"].([]any); ok && !slices.Contains(allowed, any(mcpName)) {
			m["allowed"] = append(allowed, mcpName)
		}
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(old), b) {
		return nil // every turn after the first
	}
	return writePrivate(path, append(b, '\n'))
}

// mcpDir holds the files cast gives agents for its MCP server.
func (a *Agent) mcpDir() string { return filepath.Join(a.cfg.DataDir, "mcp") }

// writePrivate writes a file of cast's own (0600, atomically), making its
// folder.
func writePrivate(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

// registerOpenCodeMCP adds cast through OPENCODE_CONFIG_CONTENT, which
// opencode 1.18 merges over its config files: no file is written and the
// session id is the turn's own. Content the node's agents config already
// put there is kept. MCP tools run without a prompt under opencode's
// default permissions; an operator config that asks for every tool would
// need "cast_history": "allow" (not forced here, as merging into a
// permission given as a string would replace it).
func (a *Agent) registerOpenCodeMCP(t *runner.Turn, sessionID, bin string) error {
	const key = "OPENCODE_CONFIG_CONTENT"
	cfg := map[string]any{}
	if s := runner.EnvValue(t.Env, key); s != "" {
		if err := json.Unmarshal([]byte(s), &cfg); err != nil {
			a.lg.Warn("OPENCODE_CONFIG_CONTENT is not plain JSON; cast MCP server not registered", zap.Error(err))
			return nil
		}
	}
	servers, _ := cfg["mcp"].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	servers[mcpName] = map[string]any{
		"type": "local", "command": append([]string{bin}, historyOnly...),
		"environment": a.castEnv(sessionID),
		"enabled":     true,
	}
	cfg["mcp"] = servers
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	t.Env = append(t.Env, key+"="+string(b)) // last wins
	return nil
}

// castBin is the cast CLI the agents get as their MCP server: the
// configured one, or (FindCastBin, `controlplane --dev`) the first found
// now: DefaultCastBin, else bin/cast under the working directory. `go run`
// leaves no cast next to the binary, and the README builds bin/cast after
// starting the dev setup.
func (a *Agent) castBin() string {
	if a.cfg.CastBin != "" || !a.cfg.FindCastBin {
		return a.cfg.CastBin
	}
	if p := DefaultCastBin(); p != "" {
		return p
	}
	if wd, err := os.Getwd(); err == nil && isExecutable(filepath.Join(wd, "bin", "cast")) {
		return filepath.Join(wd, "bin", "cast")
	}
	return ""
}

// castEnv is what an agent's cast (`cast mcp`, `cast spawn`) needs to
// reach the control plane about its session: the address and the node's
// credential file, or with TLS the CA pin and its certificate and key.
func (a *Agent) castEnv(sessionID string) map[string]string {
	env := map[string]string{"CAST_SESSION": sessionID, "CAST_ADDR": a.cfg.ControlPlane}
	if a.id != nil {
		env["CAST_CA_PIN"], env["CAST_CLIENT_CERT"] = a.cfg.CAPin, a.id.Path()
	} else {
		env["CAST_TOKEN_FILE"] = credentialPath(a.cfg.DataDir)
	}
	if a.cfg.Insecure {
		env["CAST_INSECURE"] = "1"
	}
	return env
}

// expandAtLoad maps each variable to "$NAME", which Gemini expands from
// the turn's environment when it loads its settings.
func expandAtLoad(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k := range env {
		out[k] = "$" + k
	}
	return out
}

// tomlTable is env as an inline TOML table, keys sorted.
func tomlTable(env map[string]string) string {
	parts := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, k+"="+strconv.Quote(env[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
