package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
)

// TakeMCP adds cast to the mcpServers of an isolated agent's
// ~/.gemini/settings.json, which is cast's own: gemini-cli 0.61 has no flag
// that adds a server. The user's own gemini (a shared home) gets it another
// way (takeUserMCP): its settings file is the user's and is never
// rewritten. The file is shared by every gemini session of the node, so it names no session: gemini expands $VAR in
// settings from its own environment when it loads them, and each turn's
// environment carries its CAST_SESSION and CAST_ADDR. Expanding at load
// time also survives the redaction gemini applies to the environment it
// hands MCP servers in CI (GITHUB_SHA set), which would drop an unknown
// CAST_* variable.
//
// trust lets the history tool run headless without an approval prompt
// (gemini allows mcp_cast_* when the folder is trusted, which the
// registry's GEMINI_CLI_TRUST_WORKSPACE makes it); the history-only
// arguments keep that trust to the one read-only tool.
func (Driver) TakeMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	if t.UserEnv != nil {
		return takeUserMCP(s, t)
	}
	// Where gemini looks: GEMINI_CLI_HOME, else HOME, as the turn sets them.
	home := agents.EnvValue(t.Env, "GEMINI_CLI_HOME")
	if home == "" {
		home = agents.EnvValue(t.Env, "HOME")
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
			return "gemini settings " + path + " are not plain JSON: " + err.Error(), nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	agents.SetMCPServer(settings, "mcpServers", s.Name, server(s))
	// An allowlist of servers (mcp.allowed) would drop cast silently.
	if m, ok := settings["mcp"].(map[string]any); ok {
		if allowed, ok := m["allowed"].([]any); ok && !slices.Contains(allowed, any(s.Name)) {
			m["allowed"] = append(allowed, s.Name)
		}
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return "", err
	}
	if bytes.Equal(bytes.TrimSpace(old), b) {
		return "", nil // every turn after the first
	}
	return "", fsutil.WritePrivate(path, append(b, '\n'))
}

// server is cast's entry in a Gemini mcpServers map; it names no session
// (see TakeMCP): each variable is "$NAME", which Gemini expands from the
// turn's environment when it loads its settings.
func server(s agents.MCPServer) map[string]any {
	atLoad := make(map[string]string, len(s.Env))
	for k := range s.Env {
		atLoad[k] = "$" + k
	}
	return map[string]any{"command": s.Command, "args": s.HistoryArgs, "env": atLoad, "trust": true}
}

// takeUserMCP gives the user's own gemini (their HOME, settings and login)
// cast's history tool for this turn only, without touching a file of
// theirs: gemini-cli 0.61 has no flag for an MCP server, but it reads a
// system-defaults settings file from GEMINI_CLI_SYSTEM_DEFAULTS_PATH and
// merges it under the user's and workspace settings (mcpServers key by
// key, so the user's servers, auth and everything else still apply; a user
// server named "cast" wins over cast's). cast writes that file in s.Dir:
// the system defaults the machine already has (if gemini would read them)
// plus cast's server, so nothing the machine sets is hidden.
//
// Gemini reads a system file only when root owns it and every folder above
// it, none writable by group or others (CheckSystemFile). So this works
// when the node runs as root with its data dir on such a path (a
// container, a root service under /var/lib); a node run by a user cannot
// make a file gemini accepts, and the turn runs without cast's tool, saying
// why. A user allowlist of servers (mcp.allowed) without "cast" leaves it
// out too: the user's choice.
func takeUserMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	settings := map[string]any{}
	if machine := SystemDefaultsPath(t.Getenv); CheckSystemFile(machine) == nil {
		b, err := os.ReadFile(machine)
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(b, &settings); err != nil {
			// Comments, say: cast cannot carry it over, and will not hide it.
			return "the machine's gemini system defaults " + machine + " are not plain JSON: " + err.Error(), nil
		}
	}
	agents.SetMCPServer(settings, "mcpServers", s.Name, server(s))
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "gemini-system-defaults.json")
	if old, err := os.ReadFile(path); err != nil || string(old) != string(b) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if err := fsutil.WritePrivate(path, b); err != nil {
			return "", err
		}
	}
	if err := CheckSystemFile(path); err != nil {
		return "gemini runs in your own home without cast's history tool: gemini takes an extra MCP server only from a system settings file root owns, in folders only root can write (run the node as root with such a --data-dir, or use --isolated-homes); " + path + ": " + err.Error(), nil
	}
	t.Env = append(t.Env, SystemDefaultsEnv+"="+path)
	return "", nil
}
