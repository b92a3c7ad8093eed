package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A git worktree per thread: `cast fork ID --worktree BRANCH` gives the fork
// its own worktree, made by the node outside the checkout on a new branch;
// the fork's agent runs there while the parent keeps its checkout. Bad
// branch names never reach git, and a worktree base inside the checkout is
// refused with the reason.
func TestForkInItsOwnWorktree(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	repo := gitRepo(t)

	ctx := context.Background()
	parent, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Text: "first MARK-W1"})
	must(t, err)
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)

	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	var fork struct{ ID string }
	must(t, json.Unmarshal([]byte(c.must("fork", parent.Id, "--worktree", "feature/w1", "--json")), &fork))
	seq := r.send(fork.ID, "TOOLCALL CMD[pwd] MARK-W2")
	r.waitState(fork.ID, castv1.SessionState_SESSION_STATE_IDLE, seq)

	f, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: fork.ID})
	must(t, err)
	if f.Cwd == repo || f.WorktreeBranch != "feature/w1" {
		t.Fatalf("fork cwd %q branch %q", f.Cwd, f.WorktreeBranch)
	}
	if rel, err := filepath.Rel(repo, f.Cwd); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the worktree %s is inside the checkout", f.Cwd)
	}
	if got := strings.TrimSpace(gitOut(t, f.Cwd, "rev-parse", "--abbrev-ref", "HEAD")); got != "feature/w1" {
		t.Fatalf("worktree on %q", got)
	}
	if !strings.Contains(gitOut(t, repo, "worktree", "list"), f.Cwd) {
		t.Fatal("git does not list the worktree")
	}
	real, _ := filepath.EvalSymlinks(f.Cwd)
	var pwd string
	for _, m := range r.messages(fork.ID) {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT && m.Seq > seq {
			pwd = strings.TrimSpace(m.ToolResult.GetOutput())
		}
	}
	if pwd != f.Cwd && pwd != real {
		t.Fatalf("the fork's agent ran in %q, not its worktree %q", pwd, f.Cwd)
	}
	if p, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: parent.Id}); err != nil || p.Cwd != repo {
		t.Fatalf("parent cwd changed: %v %v", p, err)
	}

	// Bad names: refused by the CLI, and by the API for other clients.
	if _, errOut, code := c.run("fork", parent.Id, "--worktree=-x"); code != 2 || !strings.Contains(errOut, "not a valid branch name") {
		t.Fatalf("--worktree=-x: exit %d %q", code, errOut)
	}
	// --worktree alone takes no value, so -x after it is an unknown flag.
	if _, errOut, code := c.run("fork", parent.Id, "--worktree", "-x"); code != 2 {
		t.Fatalf("--worktree -x: exit %d %q", code, errOut)
	}
	_, err = r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: parent.Id, WorktreeBranch: "a..b"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ForkSession with a..b: %v", err)
	}

	// A base inside the checkout is refused, with the reason.
	r.node.Kill()
	r.nodeArgs = append(r.nodeArgs, "--worktree-base", filepath.Join(repo, "wt"))
	r.startNode()
	out := c.must("new", "--agent", "claude", "--cwd", repo, "--worktree", "feature/w2", "--json", "hello MARK-W3")
	var s struct{ ID string }
	must(t, json.Unmarshal([]byte(out), &s))
	failed := r.waitState(s.ID, castv1.SessionState_SESSION_STATE_FAILED, 0)
	if !strings.Contains(failed.StateReason, "inside the checkout") {
		t.Fatalf("reason %q", failed.StateReason)
	}
}

func gitRun(t *testing.T, dir string, args ...string) { t.Helper(); gitOut(t, dir, args...) }

// gitRepo is a new git checkout on main with one commit (a.txt).
func gitRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	gitRun(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o600))
	gitRun(t, repo, "add", "a.txt")
	gitRun(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
	return repo
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// A fork (no --worktree) taken while its parent's first turn runs in a
// worktree of its own (the control plane learns the worktree only when
// that turn ends) works in its parent's folder, that worktree, as a fork
// taken after that turn does. It worked in the checkout the worktree came
// from.
func TestForkInItsParentsFirstWorktreeTurnWorksThere(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi")
	parent, repo, release := inFirstWorktreeTurn(t, r, "thr/fork-wt")
	fork, err := r.c.Sessions.ForkSession(context.Background(), &castv1.ForkSessionRequest{SessionId: parent, Agent: "pi", Model: "fake/fake-model"})
	must(t, err)
	seq := r.send(fork.Id, "look around")
	f := r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	p := release()
	if f.Cwd != p.Cwd || p.Cwd == repo {
		t.Fatalf("the fork worked in %s, not in its parent's worktree %s (checkout %s)", f.Cwd, p.Cwd, repo)
	}
}

// inFirstWorktreeTurn starts a claude session in a new git checkout with
// a worktree on branch and holds its first turn at the model (its worktree
// made, the control plane not told yet). release lets the turn end and
// returns the session once idle, its cwd the worktree.
func inFirstWorktreeTurn(t *testing.T, r *turnRig, branch string) (id, repo string, release func() *castv1.Session) {
	t.Helper()
	repo = gitRepo(t)
	gate, reached, once := make(chan struct{}), make(chan struct{}), sync.Once{}
	r.fake.SetPolicy(func(req fakemodel.Request) fakemodel.Reply {
		if strings.Contains(fakemodel.LastUserText(req.Items), "MARK-WT-PARENT") {
			once.Do(func() { close(reached) })
			return fakemodel.Reply{Text: "planning", Gate: gate}
		}
		return fakemodel.Reply{Text: "done"}
	})
	s, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo,
		WorktreeBranch: branch, Text: "plan the work MARK-WT-PARENT"})
	must(t, err)
	select {
	case <-reached:
	case <-time.After(2 * time.Minute):
		t.Fatal("the session's first turn did not reach the model")
	}
	return s.Id, repo, func() *castv1.Session {
		close(gate)
		return r.waitState(s.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	}
}
