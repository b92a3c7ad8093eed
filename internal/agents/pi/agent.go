package pi

import (
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
)

// agent is pi's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	Name: "pi", DisplayName: "pi", Binary: "pi", NPMPackage: "@mariozechner/pi-coding-agent",
	Commands: agents.Commands{
		// `pi -p` puts piped stdin (trimmed) before any message argument.
		Headless:    []string{"-p"},
		Resume:      []string{"--session", "{path}", "-p"},
		Fork:        []string{"--fork", "{path}", "-p"},
		Model:       []string{"--model", "{model}"},
		Effort:      []string{"--thinking", "{effort}"},
		PromptStdin: true,
		Env:         []string{"PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"},
	},
	HomeEnv: "PI_CODING_AGENT_DIR", DefaultHome: ".pi/agent",
	Transcript:    "sessions/--<cwd with / replaced by ->--/<timestamp>_<session-id>.jsonl",
	ContextWindow: 128_000, // pi runs many providers; the smallest common window
	Caps: agents.Capabilities{CanReconstitute: true, NativeFork: agents.ForkAtEnd, ModelChange: true,
		EffortLevels: []string{"off", "minimal", "low", "medium", "high", "xhigh"}},
	Verified: true,
	Login: agents.Login{
		// auth.json holds /login's keys and tokens; models.json custom
		// providers carry their own (pi.findLogin reads both).
		Files:   []string{"auth.json", "models.json"},
		Env:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "XAI_API_KEY", "GROQ_API_KEY"},
		Command: "run `pi` and /login", Key: "ANTHROPIC_API_KEY",
		LoggedOutText: []string{"no api key found"},
	},
	Loopback: loopback,
})

// loopback adds a provider on loopback to pi's models.json.
func loopback(home, baseURL string) (agents.Loopback, error) {
	err := sandbox.WriteJSON(filepath.Join(home, ".pi", "agent", "models.json"), map[string]any{
		"providers": map[string]any{sandbox.FakeProvider: map[string]any{
			"baseUrl": baseURL + "/v1",
			"api":     "openai-completions",
			"apiKey":  sandbox.FakeAPIKey,
			"compat":  map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
			"models": []any{map[string]any{
				"id": sandbox.FakeModel, "name": "Fake Model", "contextWindow": 128000, "maxTokens": 4096,
				// A model that reads images, as the ones people use
				// do: pi replaces images with a note for one that does not.
				"input": []string{"text", "image"},
			}},
		}},
	})
	return agents.Loopback{Env: []string{"PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"},
		Model: sandbox.FakeProvider + "/" + sandbox.FakeModel}, err
}
