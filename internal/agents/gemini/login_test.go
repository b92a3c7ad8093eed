package gemini

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// TestFindLogin: gemini's login as gemini itself would find it: the auth
// type of settings.json or the environment, its key from the environment
// or the first .env file gemini reads (~/.gemini/.env before ~/.env, the
// former only in a trusted folder, which cast's turns are).
func TestFindLogin(t *testing.T) {
	trust := "GEMINI_CLI_TRUST_WORKSPACE=true" // what every cast turn sets
	apiKey := `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`
	agenttest.CheckLogins(t, "gemini", ".gemini", []agenttest.LoginCase{
		agenttest.Case("key in ~/.gemini/.env", map[string]string{".gemini/.env": "GEMINI_API_KEY=k1\n"}, []string{trust}, true, "key in HOME/.gemini/.env (GEMINI_API_KEY)"),
		agenttest.Case("key in ~/.gemini/.env, api key selected", map[string]string{".gemini/.env": "export GEMINI_API_KEY=\"k1\" # mine\n", ".gemini/settings.json": apiKey}, []string{trust}, true, "key in HOME/.gemini/.env (GEMINI_API_KEY)"),
		agenttest.Case("key in ~/.env", map[string]string{".env": "GEMINI_API_KEY: k1\n"}, []string{trust}, true, "key in HOME/.env (GEMINI_API_KEY)"),
		agenttest.Case("~/.gemini/.env first, without a key", map[string]string{".gemini/.env": "DEBUG=1\n", ".env": "GEMINI_API_KEY=k1\n"}, []string{trust}, false, "no auth method: settings.json selects none and no GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI or GOOGLE_GENAI_USE_GCA is set in its environment or HOME/.gemini/.env"),
		agenttest.Case("untrusted: ~/.gemini/.env unread", map[string]string{".gemini/.env": "GEMINI_API_KEY=k1\n"}, nil, false, "no auth method"),
		agenttest.Case("untrusted: ~/.env read", map[string]string{".gemini/.env": "GEMINI_API_KEY=k1\n", ".env": "GEMINI_API_KEY=k2\n"}, nil, true, "key in HOME/.env (GEMINI_API_KEY)"),
		agenttest.Case("key in the environment", nil, []string{"GEMINI_API_KEY=k1"}, true, "key in its environment (GEMINI_API_KEY)"),
		agenttest.Case("commented out", map[string]string{".gemini/.env": "# GEMINI_API_KEY=k1\n"}, []string{trust}, false, "no auth method"),
		agenttest.Case("google login", map[string]string{".gemini/settings.json": `{"security":{"auth":{"selectedType":"oauth-personal"}}}`, ".gemini/oauth_creds.json": "{}"}, nil, true, "logged in (HOME/.gemini/oauth_creds.json)"),
		agenttest.Case("google login missing", map[string]string{".gemini/settings.json": `{"security":{"auth":{"selectedType":"oauth-personal"}}}`}, nil, false, "settings.json selects a Google login, but HOME/.gemini/oauth_creds.json is missing"),
		agenttest.Case("login file without a selected type", map[string]string{".gemini/oauth_creds.json": "{}"}, nil, false, "no auth method"),
		agenttest.Case("api key selected, none set", map[string]string{".gemini/settings.json": apiKey}, []string{trust}, false, "settings.json selects a Gemini API key, but GEMINI_API_KEY is not set in its environment or a .env file (there is none)"),
		agenttest.Case("vertex from .env", map[string]string{".gemini/.env": "GOOGLE_GENAI_USE_VERTEXAI=true\nGOOGLE_CLOUD_PROJECT=p\nGOOGLE_CLOUD_LOCATION=us\n"}, []string{trust}, true, "Vertex AI project in HOME/.gemini/.env"),
		agenttest.Case("vertex without a project", nil, []string{"GOOGLE_GENAI_USE_VERTEXAI=true", "GOOGLE_CLOUD_PROJECT=p"}, false, "its environment implies Vertex AI, but neither"),
		agenttest.Case("gateway alone", nil, []string{"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:1", "GEMINI_API_KEY=k1"}, false, "auth type gateway, which gemini does not accept headless"),
	})
}

// TestRealGeminiKeyInDotEnv: with its key only in ~/.gemini/.env (not in
// the environment), the real gemini answers a turn from the fake model,
// sending that key, and FindLogin calls it logged in.
func TestRealGeminiKeyInDotEnv(t *testing.T) {
	bin := agenttest.Bin(t, "gemini")
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "gemini", fake.URL)
	env = agents.WithoutEnv(env, "GEMINI_API_KEY")
	const key = "key-from-dot-env-7f3a"
	nh := agenttest.NativeHome(home, "gemini")
	if err := os.WriteFile(filepath.Join(nh, ".env"), []byte("GEMINI_API_KEY="+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := agents.Lookup("gemini")
	if got, ok := a.FindLogin(nh, env); !ok || got != "key in "+filepath.Join(nh, ".env")+" (GEMINI_API_KEY)" {
		t.Fatalf("FindLogin = %v %q", ok, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cwd := filepath.Join(home, "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	agenttest.MustRun(t, ctx, bin, []string{"-p", "hello MARKER-DOTENV"}, env, cwd)
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("gemini sent the model nothing")
	}
	if got := turns[len(turns)-1].Header.Get("x-goog-api-key"); got != key {
		t.Fatalf("gemini sent key %q, want the one from %s", got, filepath.Join(nh, ".env"))
	}
}
