package agents_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	_ "github.com/cast-dev/cast/internal/agents/codecs" // links the drivers
	"github.com/cast-dev/cast/internal/fakemodel"
)

// nativeOf finds the native session a headless run created: its id and, for
// agents that resume from a file, its path.
type nativeOf func(t *testing.T, home, stdout, chosenID string) (id, path string)

func glob(t *testing.T, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(pattern)
	if len(m) != 1 {
		t.Fatalf("want exactly one native session at %s, found %v", pattern, m)
	}
	return m[0]
}

// TestCommandTemplates runs every verified agent's headless, resume and fork
// forms (with the model and effort flags) through the real CLI, built by
// agents.Agent.Args as the runner builds them: the second turn must reach
// the model with the first one as history.
func TestCommandTemplates(t *testing.T) {
	const chosen = "0c9b8c2e-5b9a-4c55-8f3e-3f4b1d2a6e71"
	tests := []struct {
		agent  string
		model  string
		effort string
		native nativeOf
	}{
		{"claude", "claude-sonnet-4-5", "high", func(t *testing.T, home, stdout, id string) (string, string) { return id, "" }},
		{"codex", agenttest.FakeModel, "low", func(t *testing.T, home, stdout, _ string) (string, string) {
			for _, l := range strings.Split(stdout, "\n") {
				var ev struct {
					ThreadID string `json:"thread_id"`
				}
				if json.Unmarshal([]byte(l), &ev) == nil && ev.ThreadID != "" {
					return ev.ThreadID, ""
				}
			}
			t.Fatalf("no thread.started event in %s", stdout)
			return "", ""
		}},
		{"gemini", "gemini-2.5-pro", "", func(t *testing.T, home, stdout, id string) (string, string) {
			return id, glob(t, filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+id[:8]+".jsonl"))
		}},
		{"pi", agenttest.FakeProvider + "/" + agenttest.FakeModel, "low", func(t *testing.T, home, stdout, _ string) (string, string) {
			return "", glob(t, filepath.Join(home, ".pi", "agent", "sessions", "*", "*.jsonl"))
		}},
		{"opencode", agenttest.FakeProvider + "/" + agenttest.FakeModel, "", nil}, // id from `opencode session list`
	}
	for _, tc := range tests {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			a, ok := agents.Lookup(tc.agent)
			if !ok {
				t.Fatal("not registered")
			}
			ctx := context.Background()
			fake := fakemodel.Start(t)
			fake.SetStrict(true) // pairing must be what a real API accepts
			bin := agenttest.Bin(t, tc.agent)
			home, env := agenttest.Env(t, tc.agent, fake.URL)
			cwd := t.TempDir()
			vars := map[string]string{"prompt": "first turn MARKER-ONE", "id": chosen, "model": tc.model, "new": uuid.NewString()}
			run := func(f agents.Form) agenttest.Result {
				args, err := a.Args(f, vars, false)
				if err != nil {
					t.Fatal(err)
				}
				if !a.Commands.PromptStdin {
					return agenttest.MustRun(t, ctx, bin, args, env, cwd)
				}
				prompt := vars["prompt"]
				return agenttest.MustRunInput(t, ctx, bin, args, env, cwd, &prompt)
			}
			lastUser := func() string {
				turns := fake.Turns()
				if len(turns) == 0 {
					t.Fatal("no turn reached the model")
				}
				var all []string
				for _, it := range turns[len(turns)-1].Items {
					if it.Role == "user" && it.Kind == fakemodel.KindText {
						all = append(all, it.Text)
					}
				}
				return strings.Join(all, "\n")
			}
			fresh := agents.FormFresh
			if d, _ := a.Driver(); d != nil {
				if n, ok := d.(agents.SessionNamer); ok {
					// The runner names the new session's file (pi --session F).
					fresh, vars["path"] = agents.FormResume, n.NewSessionPath(filepath.Join(home, filepath.FromSlash(a.DefaultHome)), cwd)
				}
			}
			res := run(fresh)
			if tc.native != nil {
				vars["id"], vars["path"] = tc.native(t, home, res.Stdout, chosen)
			} else {
				out := agenttest.MustRun(t, ctx, bin, []string{"session", "list", "--format", "json"}, env, cwd)
				var list []struct{ ID string }
				if err := json.Unmarshal([]byte(out.Stdout), &list); err != nil || len(list) != 1 {
					t.Fatalf("session list: %v %s", err, out.Stdout)
				}
				vars["id"] = list[0].ID
			}
			vars["prompt"], vars["effort"] = "second turn MARKER-TWO", tc.effort
			run(agents.FormResume)
			if got := lastUser(); !strings.Contains(got, "MARKER-ONE") || !strings.Contains(got, "MARKER-TWO") {
				t.Fatalf("resume did not carry the first turn; user texts:\n%s", got)
			}
			if a.Commands.Fork == nil {
				return
			}
			vars["prompt"] = "forked turn MARKER-THREE"
			run(agents.FormFork)
			if got := lastUser(); !strings.Contains(got, "MARKER-TWO") || !strings.Contains(got, "MARKER-THREE") {
				t.Fatalf("fork did not carry the history; user texts:\n%s", got)
			}
		})
	}
}
