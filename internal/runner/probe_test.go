package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
)

// A probe of every real CLI against the fake model answers ready and
// leaves no session behind (noSession): Codex runs --ephemeral; the
// others' transcripts and per-cwd folders are removed, OpenCode's session
// deleted from its store.
func TestProbeLeavesNoSession(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			r, turn := setup(t, c, fake.URL)
			// A user's project index already lists a folder of theirs.
			for _, f := range agenttest.IndexFiles(turn.Agent, turn.Home, turn.AgentDir()) {
				if err := os.WriteFile(f.Path, []byte(f.Mine), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before := len(fake.Turns())
			scratch := t.TempDir()
			res, err := r.Probe(context.Background(), turn, scratch, 3*time.Minute)
			if err != nil || !res.Ready {
				t.Fatalf("probe: %+v %v", res, err)
			}
			if len(fake.Turns()) == before {
				t.Fatal("the probe did not reach the model")
			}
			noSession(t, turn, res)
			noIndexEntry(t, turn, scratch)
		})
	}
}

// A model that does not answer within the probe's timeout: the probe says
// so, the CLI is stopped, and the session it started is removed all the
// same.
func TestProbeTimeout(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	fake.SetPolicy(func(fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Gate: gate} })
	r, turn := setup(t, cases[0], fake.URL)
	// Room for the CLI to start and reach the model on a loaded machine:
	// under a full test run it had not asked yet after 20 s, and once
	// after 40 s (a fresh-clone run, load ~8). The wait is idle (the model
	// holds its answer), beside the package's other tests.
	res, err := r.Probe(context.Background(), turn, t.TempDir(), 2*time.Minute)
	want := runner.ProbeResult{Reason: runner.ReasonInterrupted, Said: "no answer within 2m0s", NativeID: res.NativeID}
	if err != nil || res != want {
		t.Fatalf("probe of a model that never answers: %+v %v, want %+v", res, err, want)
	}
	if len(fake.Turns()) == 0 {
		t.Fatal("the probe never reached the model")
	}
	noSession(t, turn, res)
}

// noIndexEntry fails t when an index file of the agent still names a
// folder under scratch (the probe's cwd), or lost the user's own entry
// (/home/me/app). (The CLI itself rewrites its file with a mode of its
// own; TestRemoveIndexEntry shows cast's removal keeps the mode.)
func noIndexEntry(t *testing.T, turn runner.Turn, scratch string) {
	t.Helper()
	for _, ix := range agenttest.IndexFiles(turn.Agent, turn.Home, turn.AgentDir()) {
		f := ix.Path
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var v struct {
			Projects map[string]json.RawMessage `json:"projects"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for dir := range v.Projects {
			if strings.HasPrefix(dir, scratch) {
				t.Errorf("%s still lists the probe's folder %s:\n%s", f, dir, b)
			}
		}
		if _, ok := v.Projects["/home/me/app"]; !ok {
			t.Errorf("%s lost the user's own entry:\n%s", f, b)
		}
	}
}

// noSession fails t when the probe's session is still in the agent's
// folder: a file there holds its prompt, or the agent's store the session
// (its rows may linger in SQLite's free pages, so the CLI is asked).
func noSession(t *testing.T, turn runner.Turn, res runner.ProbeResult) {
	t.Helper()
	dir := turn.AgentDir()
	a, _ := agents.Lookup(turn.Agent)
	d, _ := a.Driver()
	store := ""
	if sd, ok := d.(agents.StoreDriver); ok {
		store = sd.StorePath(dir)
		if res.NativeID == "" {
			t.Fatal("no session id from a store-backed agent's probe")
		}
		target := agents.Target{Home: dir, Cwd: t.TempDir()}
		if _, err := sd.Export(context.Background(), agenttest.Bin(t, turn.Agent), turn.Environ(), target, res.NativeID); err == nil {
			t.Errorf("the store still has the probe's session %s", res.NativeID)
		}
	}
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || (store != "" && strings.HasPrefix(p, store)) {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(runner.ProbePrompt)) {
			t.Errorf("%s holds the probe's prompt", p)
		}
		return nil
	})
}
