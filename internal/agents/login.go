package agents

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// LoginCheck finds a login the agent's own CLI would accept, looking where
// that CLI looks: in the agent's own folder dir and the environment env its
// turns run with. It only reads files, never runs the CLI. found says
// where the login is when ok; otherwise it may say what is missing ("").
// An agent whose driver package registers one (RegisterLoginCheck) is
// checked by it; the others by Login's Files, Settings and Env.
type LoginCheck func(l Login, dir string, env []string) (found string, ok bool)

var loginChecks = map[string]LoginCheck{}

// RegisterLoginCheck makes c the login check of the registered agent name;
// agent packages call it from init.
func RegisterLoginCheck(name string, c LoginCheck) { register(loginChecks, "login check", name, c) }

// Checked says whether anything is known about a's login (else an agent
// is ready when its binary runs).
func (a Agent) Checked() bool {
	driversMu.RLock()
	_, ok := loginChecks[a.Name]
	driversMu.RUnlock()
	l := a.Login
	return ok || len(l.Files) > 0 || len(l.Env) > 0
}

// FindLogin finds a's login in its own folder dir and its turns'
// environment env (LoginCheck).
func (a Agent) FindLogin(dir string, env []string) (string, bool) {
	driversMu.RLock()
	c, ok := loginChecks[a.Name]
	driversMu.RUnlock()
	if ok {
		return c(a.Login, dir, env)
	}
	return a.Login.find(dir, env)
}

// find is the generic check: a credential file, a settings file naming a
// key, or a key in the environment.
func (l Login) find(dir string, env []string) (string, bool) {
	for _, f := range l.Files {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			return "logged in (" + filepath.Join(dir, f) + ")", true
		}
	}
	return l.SettingsOrEnv(dir, env)
}

// SettingsOrEnv is the generic check without the credential files: a
// settings file naming a key, or a key in the environment (for a check
// that reads the files itself).
func (l Login) SettingsOrEnv(dir string, env []string) (string, bool) {
	for _, f := range slices.Sorted(maps.Keys(l.Settings)) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		for _, w := range l.Settings[f] {
			if err == nil && strings.Contains(string(b), w) {
				return "key named in " + filepath.Join(dir, f) + " (" + strings.Trim(w, `"`) + ")", true
			}
		}
	}
	return l.EnvKey(env)
}

// EnvKey finds the first of l.Env set in env.
func (l Login) EnvKey(env []string) (string, bool) {
	for _, k := range l.Env {
		if EnvValue(env, k) != "" {
			return "key in its environment (" + k + ")", true
		}
	}
	return "", false
}

// envName matches a value that names an environment variable rather than
// holding a key (pi's and Codex's configs take either).
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// NamedKey resolves a configured key the way the CLIs that take "a key or
// the name of a variable holding it" do: a variable's name counts only
// when that variable is set in env; anything else is the key itself.
func NamedKey(v string, env []string) bool {
	if envName.MatchString(v) {
		return EnvValue(env, v) != ""
	}
	return strings.TrimSpace(v) != ""
}

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
		if registry[n].Login.Fleet != nil {
			out = append(out, n)
		}
	}
	return out
}
