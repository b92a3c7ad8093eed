package adopt_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// cli is an agent's own CLI, run as its user would against the fake
// model, writing the file a rig follows.
type cli struct {
	t    *testing.T
	fake *fakemodel.Server
	a    agents.Agent
	env  []string
	cwd  string
	form agents.Form       // how the rig's session is run
	vars map[string]string // its id, or its file (pi names the file)
}

// newCLIRig is a rig following the native sessions agent's CLI (c)
// writes; its file is found once c first ran.
func newCLIRig(t *testing.T, agent string) (*rig, *cli) {
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, agent, fake.URL)
	a, _ := agents.Lookup(agent)
	c := &cli{t: t, fake: fake, a: a, env: append(env, a.Commands.Env...), cwd: agenttest.Cwd(t, home, "proj"),
		form: agents.FormFresh, vars: map[string]string{"id": agents.NewNativeID(agent)}}
	r := newRig(t)
	r.agent, r.home = agent, agenttest.NativeHome(home, agent)
	if d, _ := a.Driver(); d != nil {
		if n, ok := d.(agents.SessionNamer); ok {
			c.form, c.vars = agents.FormResume, map[string]string{"path": n.NewSessionPath(r.home, c.cwd)}
		}
	}
	return r, c
}

// run runs one turn of the rig's session.
func (c *cli) run(prompt string) {
	c.t.Helper()
	args, err := c.a.Args(c.form, c.vars, false)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agenttest.MustRunInput(c.t, ctx, agenttest.Bin(c.t, c.a.Name), args, c.env, c.cwd, &prompt)
}

// A file deleted and then written again at its path by the agent's own
// CLI as another native session (pi --session on the deleted file's path
// starts a new session under a new id) is adopted as that session, whole:
// the same prompt typed again is its first message, not taken for the one
// the old session kept. Before, the new file was read as a rewrite of the
// old one: its messages went to the old cast session under the old id and
// the repeated prompt was never kept.
func TestFollowNewSessionAtADeletedFilesPath(t *testing.T) {
	r, c := newCLIRig(t, "pi")
	r.file = c.vars["path"]
	d, _ := c.a.Driver()
	const prompt = "fix the tests"
	c.run(prompt)
	got := r.scan()
	first := r.sink.batches[len(r.sink.batches)-1]
	if len(got) != 2 || got[0] != prompt {
		t.Fatalf("first session: sent %q", got)
	}
	if err := os.Remove(r.file); err != nil {
		t.Fatal(err)
	}
	want(t, "deleted", r.scan())
	c.run(prompt)
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

// A file deleted while its CLI still writes the session (the user's rm,
// Claude Code's clean-up of old sessions when one is resumed) is begun
// again by the CLI's next append, holding only what came after: that is
// adopted into the same cast session, a text kept before among it too.
// Before, the new file was read as a rewrite of the old one and the
// answer ("yes" again) was taken as kept and lost; pi's file, without its
// header now, was taken for another session named by an entry's id.
// (Codex writes on to the deleted file: nothing of it is there to adopt.)
func TestFollowFileDeletedWhileItsCLIWrites(t *testing.T) {
	for _, agent := range []string{"claude", "pi", "gemini"} {
		t.Run(agent, func(t *testing.T) {
			r, c := newCLIRig(t, agent)
			gate := make(chan struct{})
			// A tool call, then the answer held until the file is gone.
			c.fake.Enqueue(fakemodel.Reply{Text: "yes", Shell: "echo one"}, fakemodel.Reply{Text: "yes", Gate: gate})
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.run("go on")
			}()
			var got []string
			for deadline := time.Now().Add(time.Minute); len(got) < 4; { // the prompt, "yes", the call, its result
				if time.Now().After(deadline) {
					close(gate)
					t.Fatalf("adopted while the turn runs: %q", got)
				}
				files, _ := agents.NativeSessions(agent, r.home)
				if len(files) == 1 {
					r.file = files[0]
					got = append(got, r.scan()...)
				}
				time.Sleep(50 * time.Millisecond) // polling the CLI's writes
			}
			first := r.sink.batches[0]
			if err := os.Remove(r.file); err != nil {
				t.Fatal(err)
			}
			want(t, "deleted", r.scan())
			close(gate)
			<-done
			want(t, "begun again", r.scan(), "yes")
			last := r.sink.batches[len(r.sink.batches)-1]
			if last.SessionID != "cast-"+first.NativeID || last.NativeID != first.NativeID {
				t.Fatalf("the rest went to session %q as %s; want %q as %s", last.SessionID, last.NativeID, "cast-"+first.NativeID, first.NativeID)
			}
		})
	}
}

// A file its CLI rewrites while it is followed (pi upgrades a session of
// an older format when it resumes it: the file is written anew, its
// entries under new ids) is read again without repeats: only what the
// resumed turn added is sent. The rewrite holds no message read before
// by its id, but each by its time.
func TestFollowFileRewrittenByItsCLI(t *testing.T) {
	r, c := newCLIRig(t, "pi")
	r.file = c.vars["path"]
	if err := os.MkdirAll(filepath.Dir(r.file), 0o700); err != nil {
		t.Fatal(err)
	}
	// A session of pi's first format: no version in its header.
	r.write(`{"type":"session","id":"0f1e2d3c-0000-4000-8000-00000000a001","timestamp":"2026-07-09T10:00:00.000Z","cwd":"`+c.cwd+`"}`+"\n",
		`{"type":"message","id":"u1","parentId":null,"timestamp":"2026-07-09T10:00:01.000Z","message":{"role":"user","content":"old prompt"}}`+"\n",
		`{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-07-09T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"old answer"}],`+
			`"provider":"fake","model":"fake-model","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}}`+"\n")
	want(t, "import", r.scan(), "old prompt", "old answer")
	c.run("more please")
	if b, err := os.ReadFile(r.file); err != nil || !strings.Contains(string(b), `"version":3`) || strings.Contains(string(b), `"id":"u1"`) {
		t.Fatalf("pi did not upgrade the file (%v):\n%s", err, b)
	}
	got := r.scan()
	if len(got) != 2 || got[0] != "more please" {
		t.Fatalf("after the upgrade: sent %q; want the new prompt and its answer only", got)
	}
}
