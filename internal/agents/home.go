package agents

import "path/filepath"

// NativeHome is a's own folder under an isolated HOME home, the folder
// Target.Home means: CLAUDE_CONFIG_DIR for claude, CODEX_HOME for codex,
// ~/.gemini for gemini, pi's agent dir, XDG_DATA_HOME for opencode.
func (a Agent) NativeHome(home string) string {
	if a.DefaultHome != "" {
		return filepath.Join(home, filepath.FromSlash(a.DefaultHome))
	}
	return filepath.Join(home, "."+a.Name)
}

// Dir is a's own folder (Target.Home) as a process started with env sees
// it: its home variable when set, else its default folder under HOME.
func (a Agent) Dir(env []string) string {
	if a.HomeEnv != "" {
		if v := EnvValue(env, a.HomeEnv); v != "" {
			return v
		}
	}
	return a.NativeHome(EnvValue(env, "HOME"))
}
