package agenttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Names the fake provider uses in every agent's config.
const (
	FakeModel    = "fake-model"
	FakeProvider = "fake"
	FakeAPIKey   = "sk-fake-key-for-loopback"
)

// NativeHome is the agent's own folder under home, the one agents.Target.Home
// means: CLAUDE_CONFIG_DIR, CODEX_HOME, ~/.gemini, pi's agent dir, and
// XDG_DATA_HOME for opencode.
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
	case "grok":
		return filepath.Join(home, ".grok")
	}
	return ""
}

// Env builds an isolated environment for agent talking to the fake model at
// fakeURL (scheme://host:port, no path). Every directory the CLI could write
// (HOME, XDG_*, TMPDIR, its config dir) is a fresh t.TempDir, because even
// `--version` writes into HOME and the real ~/.claude etc. must never be
// touched. The environment is built from scratch rather than from os.Environ
// so a developer's real API keys and agent settings cannot leak in; only PATH
// (the npm launchers need node) and locale come from the outside.
func Env(t testing.TB, agent, fakeURL string) (home string, env []string) {
	t.Helper()
	fakeURL = strings.TrimRight(fakeURL, "/")
	root := t.TempDir()
	home = filepath.Join(root, "home")
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{home, tmp} {
		mkdir(t, d)
	}
	xdg := map[string]string{
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_DATA_HOME":   filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME":  filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME":  filepath.Join(home, ".cache"),
	}
	env = []string{
		"HOME=" + home,
		"USER=cast-test",
		"TMPDIR=" + tmp,
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		// No telemetry, update checks or crash reports from any CLI.
		"DO_NOT_TRACK=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
	for k, v := range xdg {
		mkdir(t, v)
		env = append(env, k+"="+v)
	}
	nh := NativeHome(home, agent)
	switch agent {
	case "claude":
		mkdir(t, nh)
		env = append(env,
			"CLAUDE_CONFIG_DIR="+nh,
			"ANTHROPIC_BASE_URL="+fakeURL,
			"ANTHROPIC_API_KEY="+FakeAPIKey,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		)
	case "codex":
		mkdir(t, nh)
		writeFile(t, filepath.Join(nh, "config.toml"), codexConfig(fakeURL))
		env = append(env,
			"CODEX_HOME="+nh,
			"FAKE_API_KEY="+FakeAPIKey,
		)
	case "gemini":
		mkdir(t, nh)
		// GOOGLE_GEMINI_BASE_URL alone makes the auth type "gateway", which
		// headless mode rejects (rc 41); pinning gemini-api-key fixes that and
		// the env base URL is still honoured.
		writeJSON(t, filepath.Join(nh, "settings.json"), map[string]any{
			"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			"general": map[string]any{
				"enableAutoUpdate":             false,
				"enableAutoUpdateNotification": false,
			},
		})
		env = append(env,
			"GEMINI_API_KEY="+FakeAPIKey,
			"GOOGLE_GEMINI_BASE_URL="+fakeURL,
			"GEMINI_CLI_TRUST_WORKSPACE=true", // else rc 55 "not a trusted directory"
			"GEMINI_CLI_NO_RELAUNCH=true",     // no child node re-spawn with a bigger heap
		)
	case "pi":
		mkdir(t, nh)
		writeJSON(t, filepath.Join(nh, "models.json"), map[string]any{
			"providers": map[string]any{FakeProvider: map[string]any{
				"baseUrl": fakeURL + "/v1",
				"api":     "openai-completions",
				"apiKey":  FakeAPIKey,
				"compat":  map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
				"models": []any{map[string]any{
					"id": FakeModel, "name": "Fake Model", "contextWindow": 128000, "maxTokens": 4096,
				}},
			}},
		})
		env = append(env,
			"PI_CODING_AGENT_DIR="+nh,
			"PI_OFFLINE=1",
			"PI_SKIP_VERSION_CHECK=1",
			"PI_TELEMETRY=0",
		)
	case "opencode":
		writeJSON(t, filepath.Join(xdg["XDG_CONFIG_HOME"], "opencode", "opencode.json"), map[string]any{
			"$schema":     "https://opencode.ai/config.json",
			"autoupdate":  false,
			"share":       "disabled",
			"model":       FakeProvider + "/" + FakeModel,
			"small_model": FakeProvider + "/" + FakeModel,
			"provider": map[string]any{FakeProvider: map[string]any{
				"npm":     "@ai-sdk/openai-compatible", // bundled: nothing is downloaded
				"name":    "Fake loopback",
				"options": map[string]any{"baseURL": fakeURL + "/v1", "apiKey": FakeAPIKey},
				"models": map[string]any{FakeModel: map[string]any{
					"name": "Fake Model", "tool_call": true,
					"limit": map[string]any{"context": 128000, "output": 4096},
				}},
			}},
			"permission": map[string]any{"bash": "allow", "edit": "allow", "webfetch": "deny"},
		})
		env = append(env,
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_SHARE=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
			"OPENCODE_DISABLE_CLAUDE_CODE=1",
		)
	case "grok":
		// The npm Grok CLI reads these; flags would be saved to
		// ~/.grok/user-settings.json, env vars are not.
		env = append(env,
			"GROK_API_KEY="+FakeAPIKey,
			"GROK_BASE_URL="+fakeURL+"/v1",
			"GROK_MODEL="+FakeModel,
		)
	default:
		t.Fatalf("agenttest: no test environment for agent %q", agent)
	}
	return home, env
}

// codexConfig is a config.toml with a loopback Responses provider. Codex
// 0.171 rejects wire_api = "chat", and retries are off so a fault test sees
// the first error.
func codexConfig(fakeURL string) string {
	return `model = "` + FakeModel + `"
model_provider = "` + FakeProvider + `"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.` + FakeProvider + `]
name = "Fake loopback"
base_url = "` + fakeURL + `/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`
}

// Lookup returns the value of key in env ("" when absent).
func Lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func mkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatalf("agenttest: %v", err)
	}
}

func writeFile(t testing.TB, p, s string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatalf("agenttest: %v", err)
	}
}

func writeJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("agenttest: %v", err)
	}
	writeFile(t, p, string(b)+"\n")
}
