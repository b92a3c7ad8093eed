package runner_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
)

// A probe of every real CLI against the fake model answers ready and
// leaves no session behind: no file in the agent's folder holds the
// probe's prompt (Codex runs --ephemeral; the others' transcripts and
// per-cwd folders are removed), and a store-backed agent's store no
// longer has the session (OpenCode's own export cannot find it).
func TestProbeLeavesNoSession(t *testing.T) {
	fake := fakemodel.Start(t)
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			r, turn := setup(t, c, fake.URL)
			before := len(fake.Turns())
			res, err := r.Probe(context.Background(), turn, t.TempDir(), 3*time.Minute)
			if err != nil || !res.Ready {
				t.Fatalf("probe: %+v %v", res, err)
			}
			if len(fake.Turns()) == before {
				t.Fatal("the probe did not reach the model")
			}
			dir := turn.AgentDir()
			a, _ := agents.Lookup(c.agent)
			d, _ := a.Driver()
			store := ""
			if sd, ok := d.(agents.StoreDriver); ok {
				store = sd.StorePath(dir)
				if res.NativeID == "" {
					t.Fatal("no session id from a store-backed agent's probe")
				}
				// Deleted rows may linger in SQLite's free pages: ask the CLI.
				if _, err := sd.Export(context.Background(), r.Bins[c.agent], turn.Environ(), agents.Target{Home: dir, Cwd: t.TempDir()}, res.NativeID); err == nil {
					t.Errorf("the store still has the probe's session %s", res.NativeID)
				}
			}
			_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() || (store != "" && len(p) >= len(store) && p[:len(store)] == store) {
					return nil
				}
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(runner.ProbePrompt)) {
					t.Errorf("%s holds the probe's prompt", p)
				}
				return nil
			})
		})
	}
}
