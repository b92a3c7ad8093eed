package claude

import (
	"errors"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
)

// agent is Claude Code's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	Name: "claude", DisplayName: "Claude Code", Binary: "claude", NPMPackage: "@anthropic-ai/claude-code",
	Commands: agents.Commands{
		// `claude -p` with no prompt argument reads the prompt from
		// stdin (2.1.197: a 2 MB prompt arrives whole).
		Headless: []string{"-p", "--session-id", "{id}"},
		Resume:   []string{"-p", "--resume", "{id}"},
		// The fork gets its new id up front ({new}), so the runner
		// knows which file is the fork's.
		Fork:        []string{"-p", "--resume", "{id}", "--fork-session", "--session-id", "{new}"},
		Model:       []string{"--model", "{model}"},
		Effort:      []string{"--effort", "{effort}"},
		PromptStdin: true,
		// Its usage windows appear only as stream-json events; messages
		// still come from the transcript file.
		Usage:      []string{"--output-format", "stream-json", "--verbose"},
		RunnerFork: true,
		Env:        []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
	},
	HomeEnv: "CLAUDE_CONFIG_DIR", DefaultHome: ".claude",
	Transcript:    "projects/<slug(cwd)>/<session-id>.jsonl",
	ContextWindow: 200_000,
	Caps: agents.Capabilities{CanReconstitute: true, NativeFork: agents.ForkAtEnd, ModelChange: true,
		EffortLevels: []string{"low", "medium", "high", "xhigh", "max"}, AccountSwitch: true},
	Verified: true,
	Login: agents.Login{
		Files: []string{".credentials.json"},
		Env:   []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
		Settings: map[string][]string{"settings.json": {`"apiKeyHelper"`, `"ANTHROPIC_API_KEY"`, `"ANTHROPIC_AUTH_TOKEN"`,
			`"CLAUDE_CODE_OAUTH_TOKEN"`, `"CLAUDE_CODE_USE_BEDROCK"`, `"CLAUDE_CODE_USE_VERTEX"`}},
		Command: "run `claude` and /login", Key: "ANTHROPIC_API_KEY",
		LoggedOutText: []string{"not logged in", "please run /login"},
		// $CLAUDE_CONFIG_DIR/.credentials.json, re-read by claude mid-run.
		Fleet: &agents.FleetLogin{File: ".credentials.json", Check: func(v map[string]any) error {
			o, _ := v["claudeAiOauth"].(map[string]any)
			if tok, _ := o["accessToken"].(string); tok == "" {
				return errors.New(credLayout.Shape)
			}
			return nil
		}},
	},
	Loopback: loopback,
})

// loopback points Claude Code at a model on loopback by its variables.
func loopback(_, baseURL string) (agents.Loopback, error) {
	return agents.Loopback{Env: []string{
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=" + sandbox.FakeAPIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}}, nil
}
