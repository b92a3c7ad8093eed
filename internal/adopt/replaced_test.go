package adopt_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// A file deleted and then written again at its path by the agent's own
// CLI as another native session (pi --session on the deleted file's path
// starts a new session under a new id) is adopted as that session, whole:
// the same prompt typed again is its first message, not taken for the one
// the old session kept. Before, the new file was read as a rewrite of the
// old one: its messages went to the old cast session under the old id and
// the repeated prompt was never kept.
func TestFollowNewSessionAtADeletedFilesPath(t *testing.T) {
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "pi", fake.URL)
	a, _ := agents.Lookup("pi")
	env = append(env, a.Commands.Env...)
	cwd := agenttest.Cwd(t, home, "proj")
	d, _ := a.Driver()
	r := newRig(t)
	r.agent, r.home = "pi", agenttest.NativeHome(home, "pi")
	r.file = d.(agents.SessionNamer).NewSessionPath(r.home, cwd)
	run := func(prompt string) {
		t.Helper()
		args, err := a.Args(agents.FormResume, map[string]string{"path": r.file}, false)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		agenttest.MustRunInput(t, ctx, agenttest.Bin(t, "pi"), args, env, cwd, &prompt)
	}
	const prompt = "fix the tests"
	run(prompt)
	got := r.scan()
	first := r.sink.batches[len(r.sink.batches)-1]
	if len(got) != 2 || got[0] != prompt {
		t.Fatalf("first session: sent %q", got)
	}
	if err := os.Remove(r.file); err != nil {
		t.Fatal(err)
	}
	want(t, "deleted", r.scan())
	run(prompt)
	got = r.scan()
	if len(got) != 2 || got[0] != prompt || slices.Contains(got, r.sink.texts(0)[1]) {
		t.Fatalf("the new session at the path: sent %q; want its prompt and its own answer", got)
	}
	second := r.sink.batches[len(r.sink.batches)-1]
	if second.SessionID != "" || second.NativeID == first.NativeID || second.NativeID != d.SessionID(r.file) {
		t.Fatalf("the new session went to session %q as %s; want a session of its own as %s (the first was %s)",
			second.SessionID, second.NativeID, d.SessionID(r.file), first.NativeID)
	}
}
