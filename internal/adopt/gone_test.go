package adopt_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/adopt"
)

// The state of a followed file that is gone is dropped once it has been
// gone a while (not at once: a file rewritten by rename or briefly moved
// away keeps its state), and a file still there keeps its state however
// long: it is never adopted again.
func TestFollowForgetsFilesThatAreGone(t *testing.T) {
	r := newRig(t)
	other := filepath.Join(filepath.Dir(r.file), "5b0c6b4e-3f7e-4e34-9a51-000000000002.jsonl")
	if err := os.WriteFile(other, []byte(line("user", "u1", "", "stays")), 0o600); err != nil {
		t.Fatal(err)
	}
	r.write(line("user", "u1", "", "goes"))
	now := time.Now()
	f, err := adopt.New([]adopt.Source{{Agent: r.agent, Home: r.home}}, r.state, r.sink, r.cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	adopt.SetClock(f, func() time.Time { return now })
	scan := func(step string, want int) {
		t.Helper()
		if _, err := f.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range names(t, r.state) {
			if filepath.Ext(name) == ".json" {
				n++
			}
		}
		if n != want {
			t.Fatalf("%s: %d state files, want %d", step, n, want)
		}
	}
	scan("both adopted", 2)
	if err := os.Remove(r.file); err != nil {
		t.Fatal(err)
	}
	scan("just gone", 2)
	now = now.Add(48 * time.Hour)
	scan("gone for two days", 1)
	now = now.Add(48 * time.Hour)
	sent := len(r.sink.batches)
	scan("still there", 1)
	want(t, "the file still there", r.sink.texts(sent))
}
