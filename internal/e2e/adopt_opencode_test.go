package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// OpenCode keeps its sessions as rows in its own database, which the node
// lists by reading it and exports through the CLI: a session started with `opencode
// run` in the node's home is adopted with every message, a direct resume
// adds its messages once, and after `opencode session delete` a `cast
// restore` loads it back under its id, where `opencode run -s` continues it
// with every earlier turn sent to the model, its new messages kept in the
// same cast session. A session cast runs there is not adopted.
func TestAdoptOpenCodeSessions(t *testing.T) {
	t.Parallel()
	const agent = "opencode"
	r := newAdoptRig(t, agent)
	home := r.homes[agent]
	data := agenttest.NativeHome(home, agent)
	// As the user runs it: the node's environment for it, plus the HOME and
	// folders the node derives for it.
	env := append(slices.Clone(r.envs[agent]), "HOME="+home, "XDG_DATA_HOME="+data,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"))
	a, _ := agents.Lookup(agent)
	run := func(cwd, prompt string, form agents.Form, vars map[string]string) {
		t.Helper()
		args, err := a.Args(form, vars, false)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		agenttest.MustRunInput(t, ctx, agenttest.Bin(t, agent), args, append(slices.Clone(env), a.Commands.Env...), cwd, &prompt)
	}
	// holds waits until the session's user turns are marks, each once, the
	// last one answered.
	holds := func(id string, marks ...string) {
		t.Helper()
		testharness.WaitFor(t, time.Minute, "adopted session holds "+strings.Join(marks, ", "), func() bool {
			var users []string
			answered := false
			for _, m := range r.messages(id) {
				switch m.Kind {
				case castv1.MessageKind_MESSAGE_KIND_USER:
					users, answered = append(users, m.Text), false
				case castv1.MessageKind_MESSAGE_KIND_ASSISTANT:
					answered = true
				}
			}
			if !answered || len(users) != len(marks) {
				return false
			}
			for i, m := range marks {
				if !strings.Contains(users[i], m) {
					return false
				}
			}
			return true
		})
	}

	cwd := agenttest.Cwd(t, home, "proj-oc")
	run(cwd, "ADOPT-OC-1 hello", agents.FormFresh, nil)
	sess := r.adopted(agent)
	o := sess.Origin
	if o.GetNode() != "worker" || o.GetAgent() != agent || !strings.HasPrefix(o.GetNativeId(), "ses_") || o.GetPath() != filepath.Join(data, "opencode", "opencode.db") {
		t.Fatalf("origin %+v", o)
	}
	if sess.Cwd != cwd {
		t.Fatalf("adopted in %q, ran in %q", sess.Cwd, cwd)
	}
	holds(sess.Id, "ADOPT-OC-1")

	// Grown by a direct resume: the new messages, once.
	run(cwd, "ADOPT-OC-2 more", agents.FormResume, map[string]string{"id": o.NativeId})
	holds(sess.Id, "ADOPT-OC-1", "ADOPT-OC-2")

	// Deleted with OpenCode's own command, then restored under its id.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	agenttest.MustRun(t, ctx, agenttest.Bin(t, agent), []string{"session", "delete", o.NativeId}, env, cwd)
	// The user's one config folder holds cast's export log and OpenCode's
	// settings (its default model, which the restore's writer asks for).
	ocConfig := filepath.Join("opencode", "opencode.json")
	cfg, err := os.ReadFile(filepath.Join(home, ".config", ocConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.config, "opencode"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.config, ocConfig), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	castEnv := append(slices.Clone(env), "XDG_CONFIG_HOME="+r.config, "PATH="+filepath.Dir(agenttest.Bin(t, agent))+string(filepath.ListSeparator)+agents.EnvValue(env, "PATH"))
	out, errOut, code := r.castEnv(castEnv, "restore", sess.Id, "--home", data, "--json")
	var restored struct {
		NativeID string `json:"native_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &restored) != nil {
		t.Fatalf("cast restore: exit %d, out %q, err %q", code, out, errOut)
	}
	if restored.NativeID != o.NativeId {
		t.Fatalf("restored as %s, adopted from %s", restored.NativeID, o.NativeId)
	}
	r.fake.Reset()
	run(cwd, "ADOPT-OC-3 again", agents.FormResume, map[string]string{"id": restored.NativeID})
	turns := r.fake.Turns()
	if len(turns) == 0 {
		t.Fatal("the resumed restore sent nothing to the model")
	}
	assertItems(t, turns[0].Items, "ADOPT-OC-1", "ADOPT-OC-2", "ADOPT-OC-3")
	holds(sess.Id, "ADOPT-OC-1", "ADOPT-OC-2", "ADOPT-OC-3")
	if again := r.adopted(agent); again.Id != sess.Id {
		t.Fatalf("the restored session was adopted again as %s", again.Id)
	}

	// A session cast runs in the same store is cast's, not adopted.
	own, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: agent, Cwd: agenttest.Cwd(t, home, "own"), Text: "ADOPT-OC-OWN run by cast"})
	if err != nil {
		t.Fatal(err)
	}
	waitSessionState(t, r.c, own.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	run(agenttest.Cwd(t, home, "later"), "ADOPT-OC-4 another direct session", agents.FormFresh, nil)
	r.waitAdopted(agent, "ADOPT-OC-4", 2)
}
