package runner

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
)

// NativeHome is the agent's own folder under a turn's Home, the folder
// agents.Target.Home means: CLAUDE_CONFIG_DIR for claude, CODEX_HOME for
// codex, ~/.gemini for gemini, pi's agent dir, XDG_DATA_HOME for opencode.
func NativeHome(home, agent string) string {
	switch agent {
	case "claude":
		return filepath.Join(home, ".claude")
	case "codex":
		return filepath.Join(home, ".codex")
	case "gemini":
		return filepath.Join(home, ".gemini")
	case "pi":
		return filepath.Join(home, ".pi", "agent")
	case "opencode":
		return filepath.Join(home, ".local", "share")
	}
	if a, ok := agents.Lookup(agent); ok && a.DefaultHome != "" {
		return filepath.Join(home, a.DefaultHome)
	}
	return filepath.Join(home, "."+agent)
}

// passThrough are the only variables taken from the node's own
// environment: the npm launchers need node on PATH, and locale and time
// zone are harmless. Keys, base URLs and agent settings come from
// Turn.Env only, so the node operator's own credentials never leak in.
var passThrough = []string{"PATH", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL"}

// buildEnv is the turn's environment: HOME, XDG dirs, TMPDIR and the
// agent's home variable all under t.Home, then t.Env (last wins).
func buildEnv(a agents.Agent, t Turn) []string {
	var env []string
	for _, k := range passThrough {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	h := t.Home
	env = append(env,
		"HOME="+h,
		"TMPDIR="+filepath.Join(h, ".tmp"),
		"XDG_CONFIG_HOME="+filepath.Join(h, ".config"),
		"XDG_DATA_HOME="+filepath.Join(h, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(h, ".local", "state"),
		"XDG_CACHE_HOME="+filepath.Join(h, ".cache"),
		"TERM=dumb",
		"NO_COLOR=1",
		"DO_NOT_TRACK=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	)
	if a.HomeEnv != "" && a.HomeEnv != "XDG_DATA_HOME" {
		env = append(env, a.HomeEnv+"="+NativeHome(h, a.Name))
	}
	switch a.Name {
	case "gemini":
		// Headless gemini refuses an untrusted folder (rc 55) and would
		// re-spawn node with a bigger heap outside cast's control.
		env = append(env, "GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_NO_RELAUNCH=true")
	case "pi":
		env = append(env, "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0")
	case "opencode":
		env = append(env, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1")
	case "claude":
		env = append(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	}
	return append(env, t.Env...)
}

// ensureDirs creates the folders the environment points at.
func ensureDirs(env []string) error {
	for _, k := range []string{"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR"} {
		if v := EnvValue(env, k); v != "" {
			if err := os.MkdirAll(v, 0o700); err != nil {
				return err
			}
		}
	}
	return nil
}

// EnvValue returns the last value of key in env ("" when absent): the
// value a process started with env sees.
func EnvValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
