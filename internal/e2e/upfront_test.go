package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Every refusal that can be known before a session is touched is given
// before: a switch or fork to an agent the node lacks, --worktree outside
// git, a prompt over the store's limit; nothing is stored or changed.
func TestRefusalsComeBeforeAnythingIsStored(t *testing.T) {
	r := newTurnRig(t, "claude", "pi")
	run := r.cast
	id := r.create("claude", "MARK-UP1 hello")
	before, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	// stored checks, after each refusal, that the store holds only the
	// first session, unchanged.
	stored := func(step string) {
		t.Helper()
		list, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{IncludeSubagents: true, IncludeArchived: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Sessions {
			if s.Id == id {
				if s.Agent != "claude" || s.LastSeq != before.LastSeq {
					t.Errorf("%s touched %s: agent %s, last seq %d (was %d)", step, id, s.Agent, s.LastSeq, before.LastSeq)
				}
				continue
			}
			t.Errorf("after %s the store holds session %s (%s, hidden %v, %d messages); want only %s", step, s.Id, s.Title, s.Subagent, s.LastSeq, id)
			if _, err := r.c.Sessions.DeleteSession(context.Background(), &castv1.DeleteSessionRequest{SessionId: s.Id, Purge: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	noCodex := "cast: node worker has no codex CLI (it has claude, pi); install it there, or pick another node or agent\n"
	for _, args := range [][]string{{"switch", id, "--agent", "codex"}, {"fork", id, "--agent", "codex"}} {
		if _, errOut, code := run("", args...); code != 1 || errOut != noCodex {
			t.Errorf("cast %s: exit %d, err %q; want 1, %q", strings.Join(args, " "), code, errOut, noCodex)
		}
		stored(args[0])
	}
	notGit := t.TempDir()
	wantGit := "cast: --worktree needs a git checkout, and " + notGit + " is not in one: run the command in a checkout (or give --cwd one), run `git init` and commit there first, or drop --worktree\n"
	if _, errOut, code := run("", "new", "--agent", "claude", "--cwd", notGit, "--worktree", "feat/x", "hello"); code != 2 || errOut != wantGit {
		t.Errorf("new --worktree outside git: exit %d, err %q; want 2, %q", code, errOut, wantGit)
	}
	stored("new --worktree")
	wantBig := "cast: message is 9437"
	if _, errOut, code := run(strings.Repeat("a", 9<<20), "exec", "--agent", "claude", "--cwd", t.TempDir()); code != 1 || !strings.HasPrefix(errOut, wantBig) || !strings.Contains(errOut, "the limit is 8388608") {
		t.Errorf("exec of 9 MiB: exit %d, err %q", code, errOut)
	}
	stored("exec of 9 MiB")
}

// `cast exec --dry-run` shows the command the node that would run it
// uses: that node's CLI and the session path under its agent folder, not
// a default data dir the node never uses.
func TestExecDryRunShowsTheNodesCommand(t *testing.T) {
	r := newTurnRig(t, "pi")
	out, errOut, code := r.cast("", "exec", "--dry-run", "--agent", "pi", "--cwd", t.TempDir(), "hello")
	want := "printf %s hello | " + agenttest.Bin(t, "pi") + " --session " + r.homes["pi"] + "/"
	if code != 0 || errOut != "" || !strings.HasPrefix(out, want) || strings.Contains(out, "cast-node") {
		t.Fatalf("exec --dry-run: exit %d, out %q, err %q; want it to start %q", code, out, errOut, want)
	}
}

// cast runs the cast CLI against the rig's control plane with stdin.
func (r *turnRig) cast(stdin string, args ...string) (string, string, int) {
	r.t.Helper()
	bin := filepath.Join(testharness.Binaries(r.t), "cast")
	return testharness.RunInput(r.t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(stdin), 2*time.Minute, bin, args...)
}
