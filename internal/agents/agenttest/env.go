package agenttest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"

	"github.com/cast-dev/cast/internal/agents/sandbox"
)

// Names the fake provider uses in every agent's config.
const (
	FakeModel    = sandbox.FakeModel
	FakeProvider = sandbox.FakeProvider
	FakeAPIKey   = sandbox.FakeAPIKey
)

// NativeHome is the agent's own folder under home, the one agents.Target.Home
// means: CLAUDE_CONFIG_DIR, CODEX_HOME, ~/.gemini, pi's agent dir, and
// XDG_DATA_HOME for opencode (the registry's DefaultHome under home; ""
// for an agent whose package is not linked).
func NativeHome(home, agent string) string {
	a, ok := agents.Lookup(agent)
	if !ok || a.DefaultHome == "" {
		return ""
	}
	return filepath.Join(home, filepath.FromSlash(a.DefaultHome))
}

// Env builds an isolated environment for agent talking to the fake model at
// fakeURL (scheme://host:port, no path). Every directory the CLI could write
// (HOME, XDG_*, TMPDIR, its config dir) is a fresh t.TempDir, because even
// `--version` writes into HOME and the real ~/.claude etc. must never be
// touched. The environment is built from scratch rather than from os.Environ
// so a developer's real API keys and agent settings cannot leak in; only PATH
// (the npm launchers need node) and locale come from the outside.
func Env(t testing.TB, agent, fakeURL string) (home string, env []string) {
	t.Helper()
	fakeURL = strings.TrimRight(fakeURL, "/")
	root := t.TempDir()
	home = filepath.Join(root, "home")
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{home, tmp} {
		mkdir(t, d)
	}
	xdg := map[string]string{
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_DATA_HOME":   filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME":  filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME":  filepath.Join(home, ".cache"),
	}
	env = []string{
		"HOME=" + home,
		"USER=cast-test",
		"TMPDIR=" + tmp,
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		// No telemetry, update checks or crash reports from any CLI.
		"DO_NOT_TRACK=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
	for k, v := range xdg {
		mkdir(t, v)
		env = append(env, k+"="+v)
	}
	nh := NativeHome(home, agent)
	// The agent's own folder, moved by its variable where it has one; the
	// settings that point it at the fake come from sandbox (shared with
	// the conformance canaries).
	if nh != "" {
		mkdir(t, nh)
	}
	if a, _ := agents.Lookup(agent); a.HomeEnv != "" && agents.EnvValue(env, a.HomeEnv) == "" {
		env = append(env, a.HomeEnv+"="+nh)
	}
	sb, err := sandbox.Setup(agent, home, fakeURL)
	if err != nil {
		t.Fatalf("agenttest: no test environment for agent %q: %v", agent, err)
	}
	env = append(env, sb.Env...)
	return home, env
}

func mkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatalf("agenttest: %v", err)
	}
}

// CodexChatGPT turns the Codex folder nh (made by Env) into a ChatGPT
// login's: the provider takes the login's bearer instead of FAKE_API_KEY,
// and the ChatGPT backend such a login calls (plugins, MCP, account
// checks) is the fake model too, so nothing leaves 127.0.0.1.
func CodexChatGPT(t testing.TB, nh, fakeURL string) {
	t.Helper()
	p := filepath.Join(nh, "config.toml")
	cfg, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("agenttest: %v", err)
	}
	out := `chatgpt_base_url = "` + strings.TrimRight(fakeURL, "/") + `/backend-api/"` + "\n" +
		strings.Replace(string(cfg), `env_key = "FAKE_API_KEY"`, `requires_openai_auth = true`, 1)
	if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
		t.Fatalf("agenttest: %v", err)
	}
}

// NodeEnv is agent's environment as a node's agents config gives it (Env
// adjusted). A refused prompt fails Claude at once instead of being
// retried. OpenCode's has no HOME, TMPDIR or XDG dirs, as a user's config
// would not: the node derives them from the agent's home (Env keeps its
// config where they point), so every run of the CLI must get them from the
// node.
func NodeEnv(t testing.TB, agent, fakeURL string) (home string, env []string) {
	home, env = Env(t, agent, fakeURL)
	switch agent {
	case "claude":
		env = append(env, "CLAUDE_CODE_MAX_RETRIES=0")
	case "opencode":
		env = slices.DeleteFunc(env, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return k == "HOME" || k == "TMPDIR" || strings.HasPrefix(k, "XDG_")
		})
	}
	return home, env
}

// Layout writes files (paths relative to it, contents) into a new scratch
// HOME and returns it: a login's real file layout for a table test.
func Layout(t testing.TB, files map[string]string) string {
	t.Helper()
	home := t.TempDir()
	for p, body := range files {
		full := filepath.Join(home, p)
		mkdir(t, filepath.Dir(full))
		if err := os.WriteFile(full, []byte(body), 0o600); err != nil {
			t.Fatalf("agenttest: %v", err)
		}
	}
	return home
}
