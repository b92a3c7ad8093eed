package claude

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// TestFindLogin: claude is logged in by .credentials.json holding an OAuth
// token, a settings.json naming a key, or a key in the environment; an
// empty or {} .credentials.json is no login.
func TestFindLogin(t *testing.T) {
	agenttest.CheckLogins(t, "claude", "", []agenttest.LoginCase{
		agenttest.Case("empty credentials", map[string]string{".credentials.json": ""}, nil, false, ""),
		agenttest.Case("{} credentials", map[string]string{".credentials.json": "{}"}, nil, false, ""),
		agenttest.Case("no token", map[string]string{".credentials.json": `{"claudeAiOauth":{"accessToken":""}}`}, nil, false, ""),
		agenttest.Case("token without the inference scope", map[string]string{".credentials.json": `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","scopes":["user:profile"]}}`}, nil, false, ""),
		agenttest.Case("oauth login", map[string]string{".credentials.json": `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","refreshToken":"r","scopes":["user:inference"]}}`}, nil, true, "logged in (DIR/.credentials.json)"),
		agenttest.Case("api key helper", map[string]string{".credentials.json": "{}", "settings.json": `{"apiKeyHelper":"pass show claude"}`}, nil, true, "key named in DIR/settings.json (apiKeyHelper)"),
		agenttest.Case("key in the environment", map[string]string{".credentials.json": "{}"}, []string{"ANTHROPIC_API_KEY=sk-1"}, true, "key in its environment (ANTHROPIC_API_KEY)"),
		agenttest.Case("nothing", nil, nil, false, ""),
	})
}

// TestRealClaudeEmptyCredentials: the real claude, with no key, refuses to
// run on a {} .credentials.json ("Not logged in"), so FindLogin must not
// call it a login; on an OAuth token it runs.
func TestRealClaudeEmptyCredentials(t *testing.T) {
	bin := agenttest.Bin(t, "claude")
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "claude", fake.URL)
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
	dir := agenttest.NativeHome(home, "claude")
	a, _ := agents.Lookup("claude")
	exp := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	for _, tc := range []struct {
		creds    string
		loggedIn bool
	}{
		{"{}", false},
		{`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-CLAUDE-NO-SCOPE","expiresAt":` + exp + `}}`, false},
		{`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-CLAUDE-OK","expiresAt":` + exp + `,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`, true},
	} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".credentials.json"), []byte(tc.creds), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		res := agenttest.Run(t, ctx, bin, []string{"-p", "hello MARKER-LOGIN", "--output-format", "json"}, env, home)
		cancel()
		ran := res.ExitCode == 0
		if ran != tc.loggedIn {
			t.Fatalf("claude on %s: exit %d, want it to run %v\nstdout:\n%s\nstderr:\n%s", tc.creds, res.ExitCode, tc.loggedIn, res.Stdout, res.Stderr)
		}
		if !ran && !a.Login.IsLoggedOut(res.Stdout+res.Stderr) {
			t.Fatalf("claude on %s failed for another reason:\n%s%s", tc.creds, res.Stdout, res.Stderr)
		}
		if _, ok := a.FindLogin(dir, env); ok != tc.loggedIn {
			t.Fatalf("FindLogin on %s = %v, claude itself ran: %v", tc.creds, ok, ran)
		}
	}
}
