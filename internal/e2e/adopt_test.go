package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codecs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/wire"
)

// adoptRig is a turn rig whose node adopts the native sessions in its
// agents' folders, and whose user config (the export log `cast restore`
// writes and the node reads) is one folder both see.
type adoptRig struct {
	*turnRig
	config string     // XDG_CONFIG_HOME of the node and the CLI
	root   testing.TB // the test the rig is for (r.t may be a subtest's)
}

func newAdoptRig(t *testing.T, names ...string) *adoptRig {
	config := t.TempDir()
	r := startTurnRig(t, nil, nil, []string{"--adopt", "--adopt-interval", "200ms"}, []string{"XDG_CONFIG_HOME=" + config}, names...)
	return &adoptRig{turnRig: r, config: config, root: t}
}

// use makes the rig fail t (a subtest) until the returned func.
func (r *adoptRig) use(t *testing.T) func() {
	parent := r.t
	r.t = t
	return func() { r.t = parent }
}

// castEnv is cast with env added.
func (r *adoptRig) castEnv(env []string, args ...string) (string, string, int) {
	r.t.Helper()
	bin := filepath.Join(testharness.Binaries(r.t), "cast")
	return testharness.RunInput(r.t, append([]string{"CAST_ADDR=" + r.addr}, env...), nil, 2*time.Minute, bin, args...)
}

// direct runs agent's own CLI in cwd as its user would, outside cast: a
// fresh session (vars without "id"/"path": a new one), or a resume.
func (r *adoptRig) direct(agent, cwd, prompt string, form agents.Form, vars map[string]string) {
	r.t.Helper()
	a, _ := agents.Lookup(agent)
	if form == agents.FormFresh && agents.NewNativeID(agent) != "" {
		vars = map[string]string{"id": uuid.NewString()}
	}
	args, err := a.Args(form, vars, false)
	if err != nil {
		r.t.Fatal(err)
	}
	env := append(slices.Clone(r.envs[agent]), a.Commands.Env...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	agenttest.MustRunInput(r.t, ctx, agenttest.Bin(r.t, agent), args, env, cwd, &prompt)
}

// adopted is the one session adopted from agent's folder, once there.
func (r *adoptRig) adopted(agent string) *castv1.Session {
	r.t.Helper()
	var id string
	testharness.WaitFor(r.t, time.Minute, "cast ls --origin native lists the "+agent+" session", func() bool {
		out, _, code := r.cast("", "ls", "--origin", "native", "--agent", agent, "-o", "name")
		id = strings.TrimSpace(out)
		return code == 0 && id != ""
	})
	if strings.Contains(id, "\n") {
		r.t.Fatalf("%s: more than one adopted session: %q", agent, id)
	}
	sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{SessionId: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return sess
}

func storedRow(m *castv1.Message) string {
	return fmt.Sprintf("%s|%s|%s|%s", m.Kind, m.Text, m.ToolCall.GetInput(), m.ToolResult.GetOutput())
}

// waitHolds waits until the session holds exactly what the agent's reader
// reads from the native file at path: every message, each once.
func (r *adoptRig) waitHolds(id, agent, path string) []*castv1.Message {
	r.t.Helper()
	rd, err := codecs.Reader(agent)
	if err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		native, err := rd.Read(path)
		if err != nil {
			r.t.Fatal(err)
		}
		var want, got []string
		for _, m := range native {
			want = append(want, storedRow(wire.ToProto(m)))
		}
		stored := r.messages(id)
		for _, m := range stored {
			got = append(got, storedRow(m))
		}
		if slices.Equal(got, want) {
			return stored
		}
		if time.Now().After(deadline) || len(got) > len(want) {
			r.t.Fatalf("session %s holds\n  %s\nthe native file reads\n  %s", id, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A session started with the agent's own CLI in the node's home is adopted
// with every message; what a direct resume adds arrives once; after the
// native file is deleted, `cast restore` writes it back, the agent's own
// resume continues it with every earlier turn sent to the model, and what
// that resume adds goes to the same cast session. It is an ordinary
// session: a message sent through cast runs a turn with the whole adopted
// history (no adopted row ever was a prompt), and so does a fork of it.
// The files cast's own turns write in the same folders are never adopted.
func TestAdoptNativeSessions(t *testing.T) {
	t.Parallel()
	names := []string{"claude", "codex", "gemini", "pi"}
	r := newAdoptRig(t, names...)
	for _, agent := range names {
		t.Run(agent, func(t *testing.T) {
			defer r.use(t)()
			mark := func(n int) string { return fmt.Sprintf("ADOPT-%s-%d", strings.ToUpper(agent), n) }
			cwd := agenttest.Cwd(t, r.homes[agent], "proj-"+agent)
			r.direct(agent, cwd, mark(1)+" hello", agents.FormFresh, nil)
			sess := r.adopted(agent)
			o := sess.Origin
			if o.GetNode() != "worker" || o.GetAgent() != agent || o.GetNativeId() == "" || !strings.HasPrefix(o.GetPath(), r.homes[agent]) {
				t.Fatalf("origin %+v", o)
			}
			r.waitHolds(sess.Id, agent, o.Path)

			// Grown by a direct resume: the new messages, once.
			r.direct(agent, cwd, mark(2)+" more", agents.FormResume, map[string]string{"id": o.NativeId, "path": o.Path})
			held := r.waitHolds(sess.Id, agent, o.Path)

			// Gone, then restored where the agent lists it.
			if err := os.Remove(o.Path); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := r.castEnv([]string{"XDG_CONFIG_HOME=" + r.config}, "restore", sess.Id, "--home", agenttest.NativeHome(r.homes[agent], agent), "--json")
			var restored struct {
				NativeID string `json:"native_id"`
				Path     string `json:"path"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &restored) != nil {
				t.Fatalf("cast restore: exit %d, out %q, err %q", code, out, errOut)
			}
			if a, _ := agents.Lookup(agent); restored.NativeID != o.NativeId && !a.Caps.IndexedIDs {
				t.Fatalf("restored as %s session %s, adopted from %s", agent, restored.NativeID, o.NativeId)
			}
			r.fake.Reset()
			r.direct(agent, cwd, mark(3)+" again", agents.FormResume, map[string]string{"id": restored.NativeID, "path": restored.Path})
			turns := r.fake.Turns()
			if len(turns) == 0 {
				t.Fatal("the resumed restore sent nothing to the model")
			}
			assertItems(t, turns[0].Items, mark(1), mark(2), mark(3))

			// What the resume added goes to the same session, after the rest.
			testharness.WaitFor(t, time.Minute, mark(3)+" kept", func() bool {
				msgs := r.messages(sess.Id)
				return len(msgs) > len(held) && slices.ContainsFunc(msgs[len(held):], func(m *castv1.Message) bool { return strings.Contains(m.Text, mark(3)) }) &&
					msgs[len(msgs)-1].Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT
			})
			if again := r.adopted(agent); again.Id != sess.Id {
				t.Fatalf("the restored file was adopted again as %s", again.Id)
			}
			for _, m := range r.messages(sess.Id)[len(held):] {
				if strings.Contains(m.Text, mark(1)) || strings.Contains(m.Text, mark(2)) {
					t.Fatalf("earlier history stored twice: %q", m.Text)
				}
			}
			// No adopted row was ever a prompt on the node.
			for _, l := range strings.Split(r.node.Output(), "\n") {
				if strings.Contains(l, "user message received") && strings.Contains(l, `"session":"`+sess.Id+`"`) {
					t.Fatalf("the node took an adopted row as a prompt: %s", l)
				}
			}

			// An ordinary session: a message through cast runs a turn with
			// the whole adopted history, and the file that turn writes is
			// cast's, not adopted.
			seq := r.send(sess.Id, mark(5)+" through cast")
			r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
			turns = r.fake.Turns()
			assertItems(t, turns[len(turns)-1].Items, mark(1), mark(2), mark(3), mark(5))
			// A fork of it carries the adopted history too, and is cast's.
			fork, err := r.c.Sessions.ForkSession(context.Background(), &castv1.ForkSessionRequest{SessionId: sess.Id})
			if err != nil {
				t.Fatal(err)
			}
			if fork.Origin != nil {
				t.Fatalf("the fork claims the origin %+v", fork.Origin)
			}
			seq = r.send(fork.Id, mark(7)+" in the fork")
			r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
			turns = r.fake.Turns()
			assertItems(t, turns[len(turns)-1].Items, mark(1), mark(3), mark(5), mark(7))
			r.direct(agent, agenttest.Cwd(t, r.homes[agent], "later-"+agent), mark(6)+" another direct session", agents.FormFresh, nil)
			r.waitAdopted(agent, mark(6), 2)
		})
	}
	// A session cast starts runs its CLI in the same folders: its file is
	// cast's (recorded once the turn ends; while it runs, adoption waits).
	t.Run("cast's own", func(t *testing.T) {
		defer r.use(t)()
		before, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{Filter: `origin = "native" AND agent = "claude"`})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "ADOPT-OWN run by cast"})
		if err != nil {
			t.Fatal(err)
		}
		waitSessionState(t, r.c, sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
		r.direct("claude", agenttest.Cwd(t, r.homes["claude"], "after-own"), "ADOPT-CLAUDE-7 after cast's own", agents.FormFresh, nil)
		r.waitAdopted("claude", "ADOPT-CLAUDE-7", len(before.Sessions)+1)
		// --origin cast lists it (and the forks above), none adopted.
		out, _, code := r.cast("", "ls", "--origin", "cast", "-o", "name")
		if ids := strings.Fields(out); code != 0 || !slices.Contains(ids, sess.Id) {
			t.Fatalf("cast ls --origin cast: exit %d, %q; want %s, the session cast started, in it", code, out, sess.Id)
		}
		for _, id := range strings.Fields(out) {
			if s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{SessionId: id}); err != nil || s.Origin != nil {
				t.Fatalf("cast ls --origin cast lists %s: %v, origin %+v", id, err, s.GetOrigin())
			}
		}
	})
}

// waitAdopted waits until a direct session whose first message holds
// mark is adopted from agent's folder, then checks that n sessions are
// adopted from there in all: none of the files cast's own turns wrote
// before it was.
func (r *adoptRig) waitAdopted(agent, mark string, n int) {
	r.t.Helper()
	var list []*castv1.Session
	testharness.WaitFor(r.t, time.Minute, "the direct "+agent+" session "+mark+" adopted", func() bool {
		resp, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{Filter: `origin = "native" AND agent = "` + agent + `"`})
		list = resp.GetSessions()
		return err == nil && slices.ContainsFunc(list, func(s *castv1.Session) bool { return strings.Contains(s.Title, mark) })
	})
	if len(list) != n {
		var got []string
		for _, s := range list {
			got = append(got, s.Id+" "+s.Title+" "+s.Origin.GetPath())
		}
		r.t.Fatalf("adopted from %s's folder:\n  %s\nwant %d", agent, strings.Join(got, "\n  "), n)
	}
}
