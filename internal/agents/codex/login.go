package codex

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/cast-dev/cast/internal/agents"
)

func init() { agents.RegisterLoginCheck("codex", findLogin) }

// providers are config.toml's model providers, as far as a login goes.
type providers struct {
	ModelProviders map[string]struct {
		EnvKey string `toml:"env_key"`
		Bearer string `toml:"experimental_bearer_token"`
	} `toml:"model_providers"`
}

// findLogin is what codex takes: auth.json holding an API key or ChatGPT
// tokens, a provider in config.toml whose env_key names a variable that is
// set (or that carries experimental_bearer_token), or a key in the
// environment.
func findLogin(l agents.Login, dir string, env []string) (string, bool) {
	auth := filepath.Join(dir, "auth.json")
	var a struct {
		Key    *string         `json:"OPENAI_API_KEY"`
		Tokens json.RawMessage `json:"tokens"`
	}
	if agents.ReadJSON(auth, &a) &&
		((a.Key != nil && *a.Key != "") || (len(a.Tokens) > 0 && string(a.Tokens) != "null")) {
		return "logged in (" + auth + ")", true
	}
	cfg := filepath.Join(dir, "config.toml")
	b, _ := os.ReadFile(cfg)
	var p providers
	_ = toml.Unmarshal(b, &p) // a config Codex cannot read names no key either
	var unset string
	bearer := false
	for _, name := range slices.Sorted(maps.Keys(p.ModelProviders)) {
		mp := p.ModelProviders[name]
		bearer = bearer || mp.Bearer != ""
		if mp.EnvKey == "" {
			continue
		}
		if agents.EnvValue(env, mp.EnvKey) != "" {
			return "key named in " + cfg + " (env_key " + mp.EnvKey + ")", true
		}
		unset = mp.EnvKey
	}
	if bearer {
		return "key named in " + cfg + " (experimental_bearer_token)", true
	}
	if found, ok := l.EnvKey(env); ok {
		return found, true
	}
	if unset != "" {
		return cfg + " names env_key " + unset + ", which is not set", false
	}
	return "", false
}
