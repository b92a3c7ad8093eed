package codex

import (
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// TestFindLogin: codex is logged in by auth.json holding a key or ChatGPT
// tokens, a provider whose env_key names a variable that is set, or a key
// in the environment; an env_key whose variable is unset is no login.
func TestFindLogin(t *testing.T) {
	provider := "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://127.0.0.1:1/v1\"\nenv_key = \"LOCAL_KEY\"\n"
	bearer := "[model_providers.\"my.proxy\"]\nexperimental_bearer_token = 'tok'\n"
	agenttest.CheckLogins(t, "codex", "", []agenttest.LoginCase{
		agenttest.Case("empty auth.json", map[string]string{"auth.json": "{}"}, nil, false, ""),
		agenttest.Case("api key", map[string]string{"auth.json": `{"OPENAI_API_KEY":"sk-1"}`}, nil, true, "logged in (DIR/auth.json)"),
		agenttest.Case("chatgpt tokens", map[string]string{"auth.json": `{"OPENAI_API_KEY":null,"tokens":{"access_token":"a"}}`}, nil, true, "logged in (DIR/auth.json)"),
		agenttest.Case("env_key set", map[string]string{"config.toml": provider}, []string{"LOCAL_KEY=k"}, true, "key named in DIR/config.toml (env_key LOCAL_KEY)"),
		agenttest.Case("env_key unset", map[string]string{"config.toml": provider}, nil, false, "DIR/config.toml names env_key LOCAL_KEY, which is not set"),
		agenttest.Case("bearer token", map[string]string{"config.toml": bearer}, nil, true, "key named in DIR/config.toml (experimental_bearer_token)"),
		agenttest.Case("key in the environment", nil, []string{"OPENAI_API_KEY=sk-1"}, true, "key in its environment (OPENAI_API_KEY)"),
	})
}
