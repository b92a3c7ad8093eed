package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"

	"github.com/cast-dev/cast/internal/agents"
)

func init() { agents.RegisterLoginCheck("codex", findLogin) }

// envKey finds the env_key settings of config.toml's model providers.
var envKey = regexp.MustCompile(`(?m)^\s*env_key\s*=\s*["']([A-Za-z_][A-Za-z0-9_]*)["']`)

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
	if b, err := os.ReadFile(auth); err == nil && json.Unmarshal(b, &a) == nil &&
		((a.Key != nil && *a.Key != "") || (len(a.Tokens) > 0 && string(a.Tokens) != "null")) {
		return "logged in (" + auth + ")", true
	}
	cfg := filepath.Join(dir, "config.toml")
	b, _ := os.ReadFile(cfg)
	var unset string
	for _, m := range envKey.FindAllStringSubmatch(string(b), -1) {
		if agents.EnvValue(env, m[1]) != "" {
			return "key named in " + cfg + " (env_key " + m[1] + ")", true
		}
		unset = m[1]
	}
	if regexp.MustCompile(`(?m)^\s*experimental_bearer_token\s*=\s*["'][^"']+`).Match(b) {
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
