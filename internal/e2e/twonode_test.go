package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Issue 23's behaviours on its setup (twoNodeRig: laptop with claude,
// build1 with claude and pi mapping the laptop's checkouts), each with its
// exact words: refusals before anything is stored, a dry-run showing the
// command of the node that would run it, an import no node has the CLI
// for, an interrupted exec and an idle interrupt, usage mistakes with a
// suggestion, and a TLS trust failure naming the CA.
func TestTwoNodeBehaviours(t *testing.T) {
	t.Parallel()
	r := newTwoNodeRig(t)
	app := filepath.Join(r.laptopSrc, "app")
	must(t, os.MkdirAll(app, 0o755))
	must(t, os.MkdirAll(filepath.Join(r.buildSrc, "app"), 0o755))

	t.Run("refusals come before anything is stored", func(t *testing.T) { twoNodeRefusals(t, r, app) })
	t.Run("dry-run shows the placed node's command", func(t *testing.T) { twoNodeDryRun(t, r, app) })
	t.Run("import needs no CLI, then switches", func(t *testing.T) { twoNodeImport(t, r, app) })
	t.Run("interrupted exec and idle interrupt", func(t *testing.T) { twoNodeInterrupt(t, r, app) })
	t.Run("usage mistakes suggest", func(t *testing.T) { usageSuggestions(t, r.admin) })
	t.Run("TLS trust failure names the CA", func(t *testing.T) { trustFailureNamesTheCA(t, r.mtlsRig) })
}

// A switch or fork to an agent the session's node lacks is refused even
// when the other node has it, and allowed on the node that has it; an
// agent no node has, --worktree outside git and a prompt over the store's
// limit are refused too; nothing is stored or changed by a refusal.
func twoNodeRefusals(t *testing.T, r *twoNodeRig, app string) {
	ctx := context.Background()
	onLaptop := strings.TrimSpace(r.laptop.must("new", "--agent", "claude", "--cwd", app))
	onBuild := strings.TrimSpace(r.laptop.must("new", "--agent", "claude", "--node", "build1", "--cwd", app))
	keep := map[string]*castv1.Session{}
	for _, id := range []string{onLaptop, onBuild} {
		s, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: id})
		must(t, err)
		keep[id] = s
	}
	// stored checks, after each refusal, that the store holds only the
	// sessions kept, unchanged.
	stored := func(step string) {
		t.Helper()
		list, err := r.c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{IncludeSubagents: true, IncludeArchived: true})
		must(t, err)
		for _, s := range list.Sessions {
			k, ok := keep[s.Id]
			if !ok {
				t.Errorf("after %s the store holds session %s (%s, hidden %v, %d messages)", step, s.Id, s.Title, s.Subagent, s.LastSeq)
				_, err := r.c.Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: s.Id, Purge: true})
				must(t, err)
				continue
			}
			if s.Agent != k.Agent || s.Node != k.Node || s.LastSeq != k.LastSeq {
				t.Errorf("%s touched %s: %s on %s, last seq %d (was %s on %s, %d)", step, s.Id, s.Agent, s.Node, s.LastSeq, k.Agent, k.Node, k.LastSeq)
			}
		}
	}
	refused := func(want string, args ...string) {
		t.Helper()
		if _, errOut, code := r.laptop.run(args...); code != 1 || errOut != want {
			t.Errorf("cast %s: exit %d, stderr %q; want 1, %q", strings.Join(args, " "), code, errOut, want)
		}
		stored(args[0])
	}

	// pi is only on build1: a laptop session may not switch or fork to it
	// there.
	noPi := "cast: node laptop has no pi CLI (it has claude); install it there, or pick another node or agent\n"
	refused(noPi, "switch", onLaptop, "--agent", "pi")
	refused(noPi, "fork", onLaptop, "--agent", "pi")
	// codex is on no node.
	refused("cast: node laptop has no codex CLI (it has claude); install it there, or pick another node or agent\n", "switch", onLaptop, "--agent", "codex")
	refused("cast: node build1 has no codex CLI (it has claude, pi); install it there, or pick another node or agent\n", "fork", onBuild, "--agent", "codex")

	notGit := t.TempDir()
	wantGit := "cast: --worktree needs a git checkout, and " + notGit + " is not in one: run the command in a checkout (or give --cwd one), run `git init` and commit there first, or drop --worktree\n"
	if _, errOut, code := r.laptop.run("new", "--agent", "claude", "--cwd", notGit, "--worktree", "feat/x", "hello"); code != 2 || errOut != wantGit {
		t.Errorf("new --worktree outside git: exit %d, stderr %q; want 2, %q", code, errOut, wantGit)
	}
	stored("new --worktree")
	_, errOut, code := testharness.RunInput(t, r.laptop.env, strings.NewReader(strings.Repeat("a", 9<<20)), 2*time.Minute, r.laptop.bin, "exec", "--agent", "claude", "--cwd", app)
	if code != 1 || !strings.HasPrefix(errOut, "cast: message is 9437") || !strings.Contains(errOut, "the limit is 8388608") {
		t.Errorf("exec of 9 MiB: exit %d, stderr %q", code, errOut)
	}
	stored("exec of 9 MiB")

	// On the node that has it, the same switch and fork are taken.
	r.laptop.must("switch", onBuild, "--agent", "pi")
	forked := strings.TrimSpace(r.laptop.must("fork", onLaptop, "--agent", "pi", "--node", "build1"))
	for id, want := range map[string]string{onBuild: "pi on build1", forked: "pi on build1"} {
		s, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: id})
		must(t, err)
		if got := s.Agent + " on " + s.Node; got != want {
			t.Errorf("session %s is %s; want %s", id, got, want)
		}
	}
}

// `cast exec --dry-run` shows the command of the node the turn would go
// to: from the laptop, claude runs on the laptop's node, and pi (only on
// build1) on build1, with build1's CLI and its session path under
// build1's pi HOME, not a default data dir that no node uses; the admin's
// context names no node, so her claude goes to build1.
func twoNodeDryRun(t *testing.T, r *twoNodeRig, app string) {
	buildApp := filepath.Join(r.buildSrc, "app") // build1's path for app (--map-path)
	for _, tc := range []struct {
		who              cli
		agent, node, cwd string
	}{{r.laptop, "claude", "laptop", app}, {r.laptop, "pi", "build1", buildApp}, {r.admin, "claude", "build1", buildApp}} {
		out, errOut, code := tc.who.run("exec", "--dry-run", "--json", "--agent", tc.agent, "--cwd", app, "hello")
		var got struct {
			Node string   `json:"node"`
			Cwd  string   `json:"cwd"`
			Argv []string `json:"argv"`
		}
		if code != 0 || errOut != "" || json.Unmarshal([]byte(out), &got) != nil || got.Node != tc.node || got.Cwd != tc.cwd ||
			len(got.Argv) == 0 || got.Argv[0] != agenttest.Bin(t, tc.agent) || strings.Contains(out, "cast-node") {
			t.Errorf("exec --dry-run --agent %s: exit %d, stdout %q, stderr %q; want it on %s in %s with %s", tc.agent, code, out, errOut, tc.node, tc.cwd, agenttest.Bin(t, tc.agent))
		}
	}
	out, errOut, code := r.laptop.run("exec", "--dry-run", "--agent", "pi", "--cwd", app, "hello")
	want := "printf %s hello | " + agenttest.Bin(t, "pi") + " --session " + r.agentHomes["build1"]["pi"] + "/"
	if code != 0 || errOut != "" || !strings.HasPrefix(out, want) || strings.Contains(out, "cast-node") {
		t.Errorf("exec --dry-run --agent pi: exit %d, stdout %q, stderr %q; want it to start %q", code, out, errOut, want)
	}
}

// Importing runs no CLI: a Grok or Muse session (real transcripts from
// getspecstory's test data, see the testdata NOTICE.md files), with no
// node having either CLI, goes to the first node (build1), which says how
// to go on; switched to Claude, its first request to the model carries the
// imported conversation.
func twoNodeImport(t *testing.T, r *twoNodeRig, app string) {
	for _, tc := range []struct{ agent, path, history string }{
		{"grok", "../agents/grok/testdata/session-basic", "The README says the project is called Project"},
		{"muse", "../agents/muse/testdata/session-multiturn.jsonl", "There are also goal, cron and subagent tools."},
	} {
		out, errOut, code := r.laptop.run("import", "--agent", tc.agent, "--cwd", app, tc.path)
		id := strings.TrimSpace(out)
		if code != 0 || id == "" {
			t.Fatalf("import --agent %s with no %s CLI on any node: exit %d, stdout %q, stderr %q", tc.agent, tc.agent, code, out, errOut)
		}
		hint := "node build1 has no " + tc.agent + " CLI; continue the session on one it has (claude, pi): `cast switch " + id + " --agent claude` (or `cast fork`, `cast handoff`)\n"
		if !strings.HasSuffix(errOut, hint) {
			t.Errorf("import --agent %s: stderr %q; want it to end %q", tc.agent, errOut, hint)
		}
		sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		if err != nil || sess.Agent != tc.agent || sess.Node != "build1" {
			t.Fatalf("imported session: %v, %v; want agent %s on build1", sess, err, tc.agent)
		}
		r.laptop.must("switch", id, "--agent", "claude")
		mark := "MARK-IMPORT-" + tc.agent
		resp, err := r.c.Sessions.SendMessage(context.Background(), &castv1.SendMessageRequest{SessionId: id, Text: mark + " go on"})
		must(t, err)
		waitSessionState(t, r.c, id, castv1.SessionState_SESSION_STATE_IDLE, resp.Message.Seq)
		turns := r.fake.Turns()
		assertItems(t, turns[len(turns)-1].Items, tc.history, mark)
	}
}

// Ctrl-C of a `cast exec` waiting on the laptop's real claude says it was
// interrupted (not "no answer within --wait"), stops the turn and exits
// 130; `cast interrupt` of the now idle session says there was nothing
// to stop (not "interrupt sent").
func twoNodeInterrupt(t *testing.T, r *twoNodeRig, app string) {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	started := r.fake.TurnsStarted()
	r.fake.Enqueue(fakemodel.Reply{Text: "HELD ANSWER", Gate: gate})
	exec := testharness.StartProcEnv(t, r.laptop.env, r.laptop.bin, "exec", "--agent", "claude", "--cwd", app, "hold on MARK-INT")
	testharness.WaitFor(t, time.Minute, "the turn at the model", func() bool { return r.fake.TurnsStarted() > started })
	exec.Signal(syscall.SIGINT)
	code, ok := exec.Wait(30 * time.Second)
	if !ok {
		t.Fatalf("cast exec ignored SIGINT:\n%s", exec.Output())
	}
	m := regexp.MustCompile(`session (\S+)'s turn`).FindStringSubmatch(exec.Output())
	if m == nil {
		t.Fatalf("cast exec names no session:\n%s", exec.Output())
	}
	id := m[1]
	want := fmt.Sprintf("cast: interrupted; stopped session %s's turn (`cast read %s` shows what it wrote)", id, id)
	if lines := strings.Split(exec.Output(), "\n"); code != 130 || !slices.Contains(lines, want) {
		t.Fatalf("interrupted cast exec: exit %d, output %q; want 130 and the line %q", code, exec.Output(), want)
	}
	sess := waitSessionState(t, r.c, id, castv1.SessionState_SESSION_STATE_IDLE, 0)
	if sess.Node != "laptop" {
		t.Errorf("the exec ran on %s; want the laptop's node", sess.Node)
	}
	out, errOut, code := r.laptop.run("interrupt", id)
	if want := fmt.Sprintf("nothing to stop: %s is not running a turn\n", id); code != 0 || out != want || errOut != "" {
		t.Fatalf("cast interrupt of idle %s (%v, delivered %d of %d): exit %d, stdout %q, stderr %q; want 0 and %q",
			id, sess.State, sess.DeliveredSeq, sess.LastSeq, code, out, errOut, want)
	}
}
