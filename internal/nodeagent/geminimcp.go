package nodeagent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/runner"
)

// geminiServer is cast's entry in a Gemini mcpServers map (see
// registerGeminiMCP for why it names no session).
func (a *Agent) geminiServer(bin string) map[string]any {
	return map[string]any{
		"command": bin, "args": historyOnly,
		"env":   expandAtLoad(a.castEnv("")),
		"trust": true,
	}
}

// registerGeminiUserMCP gives the user's own gemini (their HOME, settings
// and login) cast's history tool for this turn only, without touching a
// file of theirs: gemini-cli 0.61 has no flag for an MCP server, but it
// reads a system-defaults settings file from GEMINI_CLI_SYSTEM_DEFAULTS_PATH
// and merges it under the user's and workspace settings (mcpServers key by
// key, so the user's servers, auth and everything else still apply; a user
// server named "cast" wins over cast's). cast writes that file in its data
// dir: the system defaults the machine already has (if gemini would read
// them) plus cast's server, so nothing the machine sets is hidden.
//
// Gemini reads a system file only when root owns it and every folder above
// it, none writable by group or others (gemini.CheckSystemFile). So this
// works when the node runs as root with its data dir on such a path (a
// container, a root service under /var/lib); a node run by a user cannot
// make a file gemini accepts, and the turn runs without cast's tool, with
// one warning that says why. A user allowlist of servers (mcp.allowed)
// without "cast" leaves it out too: the user's choice.
func (a *Agent) registerGeminiUserMCP(t *runner.Turn, bin string) error {
	getenv := func(k string) string {
		if v := runner.EnvValue(t.Env, k); v != "" {
			return v
		}
		return runner.EnvValue(t.UserEnv, k)
	}
	settings := map[string]any{}
	if machine := gemini.SystemDefaultsPath(getenv); gemini.CheckSystemFile(machine) == nil {
		b, err := os.ReadFile(machine)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &settings); err != nil {
			// Comments, say: cast cannot carry it over, and will not hide it.
			a.warnGeminiNoMCP("the machine's gemini system defaults are not plain JSON", zap.String("path", machine), zap.Error(err))
			return nil
		}
	}
	servers, _ := settings["mcpServers"].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	servers[mcpName] = a.geminiServer(bin)
	settings["mcpServers"] = servers
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(a.mcpDir())
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "gemini-system-defaults.json")
	if old, err := os.ReadFile(path); err != nil || string(old) != string(b) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := writePrivate(path, b); err != nil {
			return err
		}
	}
	if err := gemini.CheckSystemFile(path); err != nil {
		a.warnGeminiNoMCP("gemini runs in your own home without cast's history tool: gemini takes an extra MCP server only from a system settings file root owns, in folders only root can write (run the node as root with such a --data-dir, or use --isolated-homes)",
			zap.String("path", path), zap.String("reason", err.Error()))
		return nil
	}
	t.Env = append(t.Env, gemini.SystemDefaultsEnv+"="+path)
	return nil
}

// warnGeminiNoMCP logs, once per node, why the user's own gemini runs
// without cast's history tool.
func (a *Agent) warnGeminiNoMCP(msg string, fields ...zap.Field) {
	a.geminiNoMCP.Do(func() { a.lg.Warn(msg, fields...) })
}
