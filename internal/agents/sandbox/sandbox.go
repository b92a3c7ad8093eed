// Package sandbox points an agent CLI in a throwaway HOME at a model on
// loopback (internal/fakemodel): the settings files it writes under HOME and
// the environment the CLI needs. The tests' isolated environments
// (agenttest.Env) and the conformance canaries (internal/canary) share it, so
// the configuration the canaries run with is the one the real-CLI tests
// prove. It never reads or writes outside the HOME it is given.
package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/fsutil"
)

// Names the fake provider uses in every agent's config.
const (
	FakeModel    = "fake-model"
	FakeProvider = "fake"
	FakeAPIKey   = "sk-fake-key-for-loopback"
)

// Sandbox is what an agent needs, beyond its HOME, to talk to the model.
type Sandbox struct {
	// Env are the variables to add (base URLs, the fake key, switches
	// that keep the CLI off the network).
	Env []string
	// Model is the --model value a turn should pass ("" for the CLI's
	// default, which its settings point at the fake).
	Model string
}

// Setup writes agent's settings for a model at baseURL (scheme://host:port,
// no path) under home, laid out as an isolated turn's HOME is
// (runner.NativeHome: ~/.codex, ~/.gemini, ~/.pi/agent, XDG dirs under
// home), and returns the environment the CLI needs on top of that HOME.
func Setup(agent, home, baseURL string) (Sandbox, error) {
	baseURL = strings.TrimRight(baseURL, "/")
	switch agent {
	case "claude":
		return Sandbox{Env: []string{
			"ANTHROPIC_BASE_URL=" + baseURL,
			"ANTHROPIC_API_KEY=" + FakeAPIKey,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		}}, nil
	case "codex":
		err := write(filepath.Join(home, ".codex", "config.toml"), []byte(codexConfig(baseURL)))
		return Sandbox{Env: []string{"FAKE_API_KEY=" + FakeAPIKey}}, err
	case "gemini":
		// GOOGLE_GEMINI_BASE_URL alone makes the auth type "gateway", which
		// headless mode rejects (rc 41); pinning gemini-api-key fixes that
		// and the env base URL is still honoured.
		err := writeJSON(filepath.Join(home, ".gemini", "settings.json"), map[string]any{
			"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			"general": map[string]any{
				"enableAutoUpdate":             false,
				"enableAutoUpdateNotification": false,
			},
		})
		return Sandbox{Env: []string{
			"GEMINI_API_KEY=" + FakeAPIKey,
			"GOOGLE_GEMINI_BASE_URL=" + baseURL,
			"GEMINI_CLI_TRUST_WORKSPACE=true", // else rc 55 "not a trusted directory"
			"GEMINI_CLI_NO_RELAUNCH=true",     // no child node re-spawn with a bigger heap
		}}, err
	case "pi":
		err := writeJSON(filepath.Join(home, ".pi", "agent", "models.json"), map[string]any{
			"providers": map[string]any{FakeProvider: map[string]any{
				"baseUrl": baseURL + "/v1",
				"api":     "openai-completions",
				"apiKey":  FakeAPIKey,
				"compat":  map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
				"models": []any{map[string]any{
					"id": FakeModel, "name": "Fake Model", "contextWindow": 128000, "maxTokens": 4096,
					// A model that reads images, as the ones people use
					// do: pi replaces images with a note for one that does not.
					"input": []string{"text", "image"},
				}},
			}},
		})
		return Sandbox{Env: []string{"PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"},
			Model: FakeProvider + "/" + FakeModel}, err
	case "opencode":
		err := writeJSON(filepath.Join(home, ".config", "opencode", "opencode.json"), map[string]any{
			"$schema":     "https://opencode.ai/config.json",
			"autoupdate":  false,
			"share":       "disabled",
			"model":       FakeProvider + "/" + FakeModel,
			"small_model": FakeProvider + "/" + FakeModel,
			"provider": map[string]any{FakeProvider: map[string]any{
				"npm":     "@ai-sdk/openai-compatible", // bundled: nothing is downloaded
				"name":    "Fake loopback",
				"options": map[string]any{"baseURL": baseURL + "/v1", "apiKey": FakeAPIKey},
				"models": map[string]any{FakeModel: map[string]any{
					"name": "Fake Model", "tool_call": true,
					"limit": map[string]any{"context": 128000, "output": 4096},
					// A model that reads images, as the ones people use do.
					"attachment": true,
					"modalities": map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}},
				}},
			}},
			"permission": map[string]any{"bash": "allow", "edit": "allow", "webfetch": "deny"},
		})
		return Sandbox{Env: []string{
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_SHARE=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
			"OPENCODE_DISABLE_CLAUDE_CODE=1",
		}}, err
	case "grok":
		// The npm Grok CLI reads these; flags would be saved to
		// ~/.grok/user-settings.json, env vars are not.
		return Sandbox{Env: []string{
			"GROK_API_KEY=" + FakeAPIKey,
			"GROK_BASE_URL=" + baseURL + "/v1",
			"GROK_MODEL=" + FakeModel,
		}}, nil
	}
	return Sandbox{}, fmt.Errorf("sandbox: no loopback setup for agent %q", agent)
}

// codexConfig is a config.toml with a loopback Responses provider. Codex
// 0.171 rejects wire_api = "chat", and retries are off so a fault test sees
// the first error.
func codexConfig(baseURL string) string {
	return `model = "` + FakeModel + `"
model_provider = "` + FakeProvider + `"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.` + FakeProvider + `]
name = "Fake loopback"
base_url = "` + baseURL + `/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return write(path, append(b, '\n'))
}

// write saves a settings file (it holds the fake key only; 0600 anyway,
// as every file naming a key).
func write(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, 0o600)
}
