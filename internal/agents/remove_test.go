package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/pi"
)

// RemoveScratch removes what a probe's run left in the agent's folder (its
// session and the CLI's folders for the scratch cwd) and nothing else: the
// user's other sessions stay, and a session path outside the agent's
// folder is refused untouched.
func TestRemoveScratch(t *testing.T) {
	for _, tc := range []struct {
		agent string
		dir   func(home, cwd string) string // the CLI's folder for cwd
	}{
		{"claude", claude.ProjectDir},
		{"pi", pi.SessionDir},
		{"gemini", func(home, cwd string) string { // a project folder marked with its root
			dir := filepath.Join(home, "tmp", filepath.Base(cwd))
			if err := os.MkdirAll(dir, 0o700); err == nil {
				_ = os.WriteFile(filepath.Join(dir, ".project_root"), []byte(cwd), 0o600)
			}
			return dir
		}},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			home, cwd, mine := t.TempDir(), t.TempDir(), t.TempDir()
			probe, kept := tc.dir(home, cwd), filepath.Join(tc.dir(home, mine), "mine.jsonl")
			session := filepath.Join(probe, "probe.jsonl")
			for _, f := range []string{session, kept, filepath.Join(probe, "memory", "x")} {
				write(t, f)
			}
			a, _ := agents.Lookup(tc.agent)
			ctx := context.Background()
			if err := a.RemoveScratch(ctx, "", nil, agents.Target{Home: home, Cwd: cwd}, "probe", session); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(probe); !os.IsNotExist(err) {
				t.Errorf("the scratch cwd's folder %s is still there (%v)", probe, err)
			}
			if _, err := os.Stat(kept); err != nil {
				t.Errorf("the user's session went: %v", err)
			}
			outside := filepath.Join(t.TempDir(), "x.jsonl")
			write(t, outside)
			if err := a.RemoveSession(ctx, "", nil, agents.Target{Home: home, Cwd: cwd}, "x", outside); err == nil {
				t.Error("a session path outside the agent's folder was not refused")
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("a file outside the agent's folder went: %v", err)
			}
		})
	}
}

func write(t *testing.T, f string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
