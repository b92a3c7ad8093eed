package gemini

import (
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
)

// agent is Gemini CLI's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	Name: "gemini", DisplayName: "Gemini CLI", Binary: "gemini", NPMPackage: "@google/gemini-cli",
	Commands: agents.Commands{
		// Without -p and with stdin not a terminal, gemini runs headless
		// on what stdin holds (0.61: up to 8 MiB; a -p text would be
		// appended to it). It waits 500 ms for the first byte, so the
		// runner writes the prompt as the CLI starts.
		Headless: []string{"--session-id", "{id}"},
		// --resume (run in the session's cwd) appends to the session's
		// file; --session-file would copy the file into a new session
		// on every turn.
		Resume:         []string{"--resume", "{id}"},
		Model:          []string{"--model", "{model}"},
		PromptStdin:    true,
		MaxPromptBytes: 8 << 20, // beyond it gemini truncates with only a debug warning
		// Headless gemini refuses an untrusted folder (rc 55) and would
		// re-spawn node with a bigger heap outside cast's control.
		Env: []string{"GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_NO_RELAUNCH=true"},
	},
	// Gemini finds its folder as $HOME/.gemini; the bundle also reads
	// GEMINI_CLI_HOME, whose exact meaning is unverified, so cast moves
	// HOME instead.
	DefaultHome:   ".gemini",
	AltHomeEnv:    "GEMINI_CLI_HOME",
	Transcript:    "tmp/<slug(basename cwd)>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl",
	ContextWindow: 1_048_576,
	Caps:          agents.Capabilities{CanReconstitute: true, NativeFork: agents.ForkNone, ModelChange: true},
	Verified:      true,
	Login: agents.Login{
		// Google login (oauth_creds.json) or a key; the selected auth type
		// lives in settings.json, which a key alone does not need, and a
		// key may sit in a .env file (gemini.findLogin).
		Files:   []string{"oauth_creds.json"},
		Env:     []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_APPLICATION_CREDENTIALS"},
		Command: "run `gemini` and choose a login", Key: "GEMINI_API_KEY",
		LoggedOutText: []string{"please set an auth method"},
	},
	Loopback: loopback,
})

// loopback pins Gemini's auth type and points it at a model on loopback.
// GOOGLE_GEMINI_BASE_URL alone makes the auth type "gateway", which
// headless mode rejects (rc 41); pinning gemini-api-key fixes that and the
// env base URL is still honoured.
func loopback(home, baseURL string) (agents.Loopback, error) {
	err := sandbox.WriteJSON(filepath.Join(home, ".gemini", "settings.json"), map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general": map[string]any{
			"enableAutoUpdate":             false,
			"enableAutoUpdateNotification": false,
		},
	})
	return agents.Loopback{Env: []string{
		"GEMINI_API_KEY=" + sandbox.FakeAPIKey,
		"GOOGLE_GEMINI_BASE_URL=" + baseURL,
		"GEMINI_CLI_TRUST_WORKSPACE=true", // else rc 55 "not a trusted directory"
		"GEMINI_CLI_NO_RELAUNCH=true",     // no child node re-spawn with a bigger heap
	}}, err
}
