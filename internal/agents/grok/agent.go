package grok

import (
	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
)

// agent is Grok Build's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	// xAI's Grok Build CLI (not the npm @vibe-kit/grok-cli, which keeps
	// no transcript). It is not distributed through npm, so nothing here
	// is run in tests; the layout comes from third-party readers.
	Name: "grok", DisplayName: "Grok Build", Binary: "grok",
	Commands: agents.Commands{
		Headless: []string{"-p", "{prompt}"},
	},
	HomeEnv: "GROK_HOME", DefaultHome: ".grok",
	Transcript:    "sessions/<url-encoded cwd>/<session-id>/chat_history.jsonl (+ summary.json, updates.jsonl)",
	ContextWindow: 256_000,
	Caps:          agents.Capabilities{CanReconstitute: true, NativeFork: agents.ForkNone},
	Login: agents.Login{
		Env: []string{"GROK_API_KEY", "XAI_API_KEY"}, Command: "run `grok` and log in", Key: "XAI_API_KEY",
	},
	Loopback: loopback,
})

// loopback points the npm Grok CLI at a model on loopback: it reads these
// variables; flags would be saved to ~/.grok/user-settings.json.
func loopback(_, baseURL string) (agents.Loopback, error) {
	return agents.Loopback{Env: []string{
		"GROK_API_KEY=" + sandbox.FakeAPIKey,
		"GROK_BASE_URL=" + baseURL + "/v1",
		"GROK_MODEL=" + sandbox.FakeModel,
	}}, nil
}
