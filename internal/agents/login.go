package agents

import (
	"fmt"
	"strings"
)

// Login is how an agent keeps its login and how a person gives it one: what
// `cast nodes` checks to call an agent ready, and what a turn that failed
// "not logged in" tells the user to do.
type Login struct {
	// Files are credential files relative to the agent's own folder
	// (Target.Home); any one present counts as a login.
	Files []string
	// Env are variables that carry a key or choose a provider's login; any
	// one set (non-empty) counts.
	Env []string
	// Settings are settings files relative to the agent's own folder and
	// the words that, present in one, mean it names a key or a way to get
	// one (Claude's apiKeyHelper, a Codex provider's env_key).
	Settings map[string][]string
	// Command is what a person runs to log the agent in themselves.
	Command string
	// Key is the variable an agents config sets instead.
	Key string
	// LoggedOutText are phrases (lower case) the CLI prints when it has no
	// login, beyond the generic ones the runner knows.
	LoggedOutText []string
	// Fleet is set for an agent whose shared credential store cast can
	// rewrite with a fleet account's credential.
	Fleet *FleetLogin
}

// FleetLogin is the credential store a fleet account fills.
type FleetLogin struct {
	// File is the store, relative to the agent's own folder.
	File string
	// Check says whether a decoded credential is one the CLI reads (what
	// the pinned versions read), before it is stored.
	Check func(cred map[string]any) error
}

// logins are per agent; an agent without an entry has no known login
// check (it is ready when its binary runs).
var logins = map[string]Login{
	"claude": {
		Files: []string{".credentials.json"},
		Env:   []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
		Settings: map[string][]string{"settings.json": {`"apiKeyHelper"`, `"ANTHROPIC_API_KEY"`, `"ANTHROPIC_AUTH_TOKEN"`,
			`"CLAUDE_CODE_OAUTH_TOKEN"`, `"CLAUDE_CODE_USE_BEDROCK"`, `"CLAUDE_CODE_USE_VERTEX"`}},
		Command: "run `claude` and /login", Key: "ANTHROPIC_API_KEY",
		LoggedOutText: []string{"not logged in", "please run /login"},
		// $CLAUDE_CONFIG_DIR/.credentials.json, re-read by claude mid-run.
		Fleet: &FleetLogin{File: ".credentials.json", Check: func(v map[string]any) error {
			o, _ := v["claudeAiOauth"].(map[string]any)
			if tok, _ := o["accessToken"].(string); tok == "" {
				return fmt.Errorf(`a Claude credential is .credentials.json with {"claudeAiOauth":{"accessToken":...}}`)
			}
			return nil
		}},
	},
	"codex": {
		Files: []string{"auth.json"},
		Env:   []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		// A provider of its own in config.toml names its key variable.
		Settings: map[string][]string{"config.toml": {"env_key", "experimental_bearer_token"}},
		Command:  "run `codex login`", Key: "OPENAI_API_KEY",
		// $CODEX_HOME/auth.json (API key or ChatGPT tokens), read at start.
		Fleet: &FleetLogin{File: "auth.json", Check: func(v map[string]any) error {
			if k, _ := v["OPENAI_API_KEY"].(string); k != "" {
				return nil
			}
			if t, _ := v["tokens"].(map[string]any); t != nil {
				return nil
			}
			return fmt.Errorf(`a Codex credential is auth.json with "OPENAI_API_KEY" or "tokens"`)
		}},
	},
	"gemini": {
		// Google login (oauth_creds.json) or a key; the selected auth type
		// lives in settings.json, which a key alone does not need.
		Files:   []string{"oauth_creds.json"},
		Env:     []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_APPLICATION_CREDENTIALS"},
		Command: "run `gemini` and choose a login", Key: "GEMINI_API_KEY",
		LoggedOutText: []string{"please set an auth method"},
	},
	"pi": {
		// auth.json holds /login's keys and tokens; models.json custom
		// providers carry their own.
		Files:   []string{"auth.json", "models.json"},
		Env:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "XAI_API_KEY", "GROQ_API_KEY"},
		Command: "run `pi` and /login", Key: "ANTHROPIC_API_KEY",
		LoggedOutText: []string{"no api key found"},
	},
	"opencode": {
		// Its folder is XDG_DATA_HOME; `opencode auth login` writes here.
		Files:   []string{"opencode/auth.json"},
		Env:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "OPENCODE_API_KEY"},
		Command: "run `opencode auth login`", Key: "ANTHROPIC_API_KEY",
	},
	"grok": {
		Env: []string{"GROK_API_KEY", "XAI_API_KEY"}, Command: "run `grok` and log in", Key: "XAI_API_KEY",
	},
	"cursor": {
		Env: []string{"CURSOR_API_KEY"}, Command: "run `cursor-agent login`", Key: "CURSOR_API_KEY",
	},
}

// Login returns how agent a logs in (zero when unknown).
func (a Agent) Login() Login { return logins[a.Name] }

// IsLoggedOut says whether line is the agent's own "no login" message.
func (l Login) IsLoggedOut(line string) bool {
	line = strings.ToLower(line)
	for _, p := range l.LoggedOutText {
		if strings.Contains(line, p) {
			return true
		}
	}
	return false
}

// FleetAgents lists the agents fleet accounts work for (Login.Fleet set),
// sorted.
func FleetAgents() []string {
	var out []string
	for _, n := range Names() {
		if logins[n].Fleet != nil {
			out = append(out, n)
		}
	}
	return out
}
