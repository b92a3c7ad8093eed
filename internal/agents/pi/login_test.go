package pi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// TestFindLogin: pi is logged in by a credential in auth.json or a custom
// provider's key in models.json, not by the empty {} auth.json pi writes
// itself; a key given as a variable's name needs that variable.
func TestFindLogin(t *testing.T) {
	agenttest.CheckLogins(t, "pi", "", []agenttest.LoginCase{
		agenttest.Case("empty auth.json", map[string]string{"auth.json": "{}"}, nil, false, ""),
		agenttest.Case("api key", map[string]string{"auth.json": `{"anthropic":{"type":"api_key","key":"sk-ant-1"}}`}, nil, true, "logged in (DIR/auth.json: anthropic)"),
		agenttest.Case("oauth login", map[string]string{"auth.json": `{"anthropic":{"type":"oauth","refresh":"r","access":"a","expires":1}}`}, nil, true, "logged in (DIR/auth.json: anthropic)"),
		agenttest.Case("key named by an unset variable", map[string]string{"auth.json": `{"openai":{"type":"api_key","key":"MY_OPENAI_KEY"}}`}, nil, false, "auth.json and models.json hold no usable key"),
		agenttest.Case("key named by a set variable", map[string]string{"auth.json": `{"openai":{"type":"api_key","key":"MY_OPENAI_KEY"}}`}, []string{"MY_OPENAI_KEY=sk-1"}, true, "logged in (DIR/auth.json: openai)"),
		agenttest.Case("key command", map[string]string{"auth.json": `{"openai":{"type":"api_key","key":"!pass show openai"}}`}, nil, true, "logged in"),
		agenttest.Case("custom provider key", map[string]string{"auth.json": "{}", "models.json": `{"providers":{"local":{"apiKey":"k","baseUrl":"http://127.0.0.1:1"}}}`}, nil, true, "key named in DIR/models.json (provider local)"),
		agenttest.Case("custom provider, variable unset", map[string]string{"models.json": `{"providers":{"local":{"apiKey":"LOCAL_KEY"}}}`}, nil, false, "hold no usable key"),
		agenttest.Case("key in the environment", map[string]string{"auth.json": "{}"}, []string{"ANTHROPIC_API_KEY=sk-1"}, true, "key in its environment (ANTHROPIC_API_KEY)"),
		agenttest.Case("nothing", nil, nil, false, ""),
	})
}

// TestRealPiEmptyAuthFile: the real pi answers a turn with its key in
// models.json and leaves an auth.json of its own behind; with the key
// gone, that file alone is no login.
func TestRealPiEmptyAuthFile(t *testing.T) {
	s := agenttest.NewSandbox(t, "pi", nil)
	dir, env := s.Native, s.Env
	s.Run(t, agenttest.Deadline(t, 4*time.Minute), "--model", "fake/fake-model", "-p", "hello MARKER-PI")
	b, err := os.ReadFile(filepath.Join(dir, "auth.json"))
	if err != nil {
		t.Fatalf("pi wrote no auth.json of its own: %v", err)
	}
	a, _ := agents.Lookup("pi")
	if got, ok := a.FindLogin(dir, env); !ok || !strings.Contains(got, "models.json") {
		t.Fatalf("with the key in models.json: FindLogin = %v %q", ok, got)
	}
	if err := os.Remove(filepath.Join(dir, "models.json")); err != nil {
		t.Fatal(err)
	}
	if got, ok := a.FindLogin(dir, env); ok {
		t.Fatalf("pi's own auth.json %s counted as a login: %q", b, got)
	}
}
