package pi

import (
	"maps"
	"path/filepath"
	"slices"

	"github.com/cast-dev/cast/internal/agents"
)

func init() { agents.RegisterLoginCheck("pi", findLogin) }

// findLogin is what pi's AuthStorage.getApiKey takes: a credential stored
// in auth.json (an api_key entry or an oauth login; pi writes an empty {}
// there itself, which holds none), a custom provider's apiKey in
// models.json, or a provider's key in the environment. A configured key
// that names a variable counts only while that variable is set
// (agents.NamedKey); one that is a !command counts as named.
func findLogin(l agents.Login, dir string, env []string) (string, bool) {
	auth := filepath.Join(dir, "auth.json")
	var creds map[string]struct {
		Type    string `json:"type"`
		Key     string `json:"key"`
		Access  string `json:"access"`
		Refresh string `json:"refresh"`
	}
	agents.ReadJSON(auth, &creds)
	for _, p := range slices.Sorted(maps.Keys(creds)) {
		c := creds[p]
		if (c.Type == "api_key" && agents.NamedKey(c.Key, env)) || (c.Type == "oauth" && (c.Access != "" || c.Refresh != "")) {
			return "logged in (" + auth + ": " + p + ")", true
		}
	}
	models := filepath.Join(dir, "models.json")
	var cfg struct {
		Providers map[string]struct {
			APIKey string `json:"apiKey"`
		} `json:"providers"`
	}
	agents.ReadJSON(models, &cfg)
	for _, p := range slices.Sorted(maps.Keys(cfg.Providers)) {
		if agents.NamedKey(cfg.Providers[p].APIKey, env) {
			return "key named in " + models + " (provider " + p + ")", true
		}
	}
	if found, ok := l.EnvKey(env); ok {
		return found, true
	}
	if len(creds) == 0 && len(cfg.Providers) == 0 {
		return "", false
	}
	return "auth.json and models.json hold no usable key", false
}
