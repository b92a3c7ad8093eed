package agents

import (
	"path/filepath"
	"strings"
)

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

// HomeHint names a's own folder for help text: its variable and default
// folder ("CLAUDE_CONFIG_DIR (~/.claude)"), or the folder alone when no
// variable moves it ("~/.gemini"). Help text builds its lists from this so
// a new agent appears there without the CLI naming it.
func (a Agent) HomeHint() string {
	dir := "~/" + a.DefaultHome
	if a.DefaultHome == "" {
		dir = "~/." + a.Name
	}
	if a.HomeEnv == "" {
		return dir
	}
	return a.HomeEnv + " (" + dir + ")"
}

// HomeHints lists the named agents' folders for help text, "HINT for
// NAME" each, comma-separated; unknown names are left out.
func HomeHints(names []string) string {
	var parts []string
	for _, n := range names {
		if a, ok := Lookup(n); ok {
			parts = append(parts, a.HomeHint()+" for "+n)
		}
	}
	return strings.Join(parts, ", ")
}
