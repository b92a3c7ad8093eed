package claude

import (
	"path/filepath"
	"slices"

	"github.com/cast-dev/cast/internal/agents"
)

func init() { agents.RegisterLoginCheck("claude", findLogin) }

// findLogin is what claude takes: .credentials.json holding an OAuth login
// (claudeAiOauth with an access or refresh token, claude refreshing an
// expired one itself, and the user:inference scope), a settings.json
// naming a key or a helper, or a key in the environment. An empty or {}
// .credentials.json, or a token without that scope, is no login: claude
// answers "Not logged in · Please run /login" on it
// (TestRealClaudeEmptyCredentials).
func findLogin(l agents.Login, dir string, env []string) (string, bool) {
	path := filepath.Join(dir, ".credentials.json")
	var c struct {
		OAuth struct {
			Access  string   `json:"accessToken"`
			Refresh string   `json:"refreshToken"`
			Scopes  []string `json:"scopes"`
		} `json:"claudeAiOauth"`
	}
	if agents.ReadJSON(path, &c) &&
		(c.OAuth.Access != "" || c.OAuth.Refresh != "") && slices.Contains(c.OAuth.Scopes, "user:inference") {
		return "logged in (" + path + ")", true
	}
	return l.SettingsOrEnv(dir, env)
}
