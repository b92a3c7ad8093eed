package codex

import (
	"errors"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
	"github.com/cast-dev/cast/internal/fsutil"
)

// agent is Codex's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	Name: "codex", DisplayName: "Codex", Binary: "codex", NPMPackage: "@openai/codex",
	Commands: agents.Commands{
		// Codex mints the id of a fresh thread (thread.started event).
		// A prompt of "-" is read from stdin.
		Headless:    []string{"exec", "--skip-git-repo-check", "--json", "-"},
		Resume:      []string{"exec", "--skip-git-repo-check", "--json", "resume", "{id}", "-"},
		Fork:        []string{"exec", "--skip-git-repo-check", "--json", "fork", "{id}", "-"},
		Model:       []string{"--model", "{model}"},
		Effort:      []string{"-c", "model_reasoning_effort={effort}"},
		PromptStdin: true,
		// Codex 0.171 refuses a turn whose text inputs add up to more
		// than 1,048,576 characters (code points, not bytes; turn/start
		// "Input exceeds the maximum length", input_too_large), in
		// `codex exec` and app-server alike: splitting the text into
		// several input items does not help, and exec has no other way
		// in. Only thread/inject_items takes more (as history, outside a
		// turn): the runner's Codex driver adds a longer prompt there
		// first and runs a short turn that points at it
		// (codex.DeliverLarge).
		MaxPromptChars: 1 << 20,
		RunnerFork:     true,
	},
	HomeEnv: "CODEX_HOME", DefaultHome: ".codex",
	Transcript:    "sessions/YYYY/MM/DD/rollout-<timestamp>-<session-id>.jsonl",
	ContextWindow: 272_000,
	Caps: agents.Capabilities{CanReconstitute: true, NativeFork: agents.ForkAtEnd, ModelChange: true,
		EffortLevels: []string{"minimal", "low", "medium", "high", "xhigh"}, ForkReadsSource: true,
		AccountSwitch: true, NativeAccountBound: true, IndexedIDs: true},
	Verified: true,
	Login: agents.Login{
		Files: []string{"auth.json"},
		Env:   []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		// A provider of its own in config.toml names its key variable.
		Settings: map[string][]string{"config.toml": {"env_key", "experimental_bearer_token"}},
		Command:  "run `codex login`", Key: "OPENAI_API_KEY",
		// $CODEX_HOME/auth.json (API key or ChatGPT tokens), read at start.
		Fleet: &agents.FleetLogin{File: "auth.json", Check: func(v map[string]any) error {
			if k, _ := v["OPENAI_API_KEY"].(string); k != "" {
				return nil
			}
			// Custody's credLayout.Usable: a file with no access token
			// runs no turn, so it is refused before it is stored.
			t, _ := v["tokens"].(map[string]any)
			if at, _ := t["access_token"].(string); at != "" {
				return nil
			}
			return errors.New(credLayout.Shape)
		}},
	},
	Loopback: loopback,
})

// loopback writes a config.toml with a loopback Responses provider. Codex
// 0.171 rejects wire_api = "chat", and retries are off so a fault test sees
// the first error. The plugins feature is off: with it on, every start syncs
// the curated plugin marketplace from github.com (git ls-remote, then
// api.github.com and chatgpt.com), which leaves 127.0.0.1
// (TestE2ETurnStaysOnLoopback). The user's own config.toml is not touched.
func loopback(home, baseURL string) (agents.Loopback, error) {
	cfg := `model = "` + sandbox.FakeModel + `"
model_provider = "` + sandbox.FakeProvider + `"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.` + sandbox.FakeProvider + `]
name = "Fake loopback"
base_url = "` + baseURL + `/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
`
	err := fsutil.WritePrivate(filepath.Join(home, ".codex", "config.toml"), []byte(cfg))
	return agents.Loopback{Env: []string{"FAKE_API_KEY=" + sandbox.FakeAPIKey}}, err
}
