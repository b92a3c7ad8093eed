package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A live thread moves into a git worktree (`cast workspace set --worktree`,
// default branch name): its next turn runs the real Claude in the worktree
// with the whole history, the worktree's setup runs in the background and
// reports in the thread. `cast worktree ls` shows it; `cast worktree rm`
// is refused while the agent runs there and with local changes (the count
// shown), and for paths cast did not make; a forced removal keeps the
// branch and its commits and moves the thread back to its checkout with a
// notice, where its next turn runs. Deleting a session leaves its worktree
// and branch alone.
func TestWorkspaceMoveAndWorktreeCleanup(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	repo := gitRepo(t)
	setup := filepath.Join(t.TempDir(), "setup.json")
	must(t, os.WriteFile(setup, []byte(`{"`+repo+`": [["mkdir", "SETUP-RAN"]]}`), 0o600))
	wtDir := t.TempDir()
	r.node.Kill()
	r.nodeArgs = append(r.nodeArgs, "--worktrees-dir", wtDir, "--worktree-setup", setup)
	r.startNode()
	ctx := context.Background()
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}

	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Title: "Fix the parser!", Text: "remember MARK-HIST-1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)

	// The move, with the default branch name.
	var moved struct {
		Cwd, Checkout  string
		WorktreeBranch string `json:"worktree_branch"`
	}
	must(t, json.Unmarshal([]byte(c.must("workspace", "set", sess.Id, "--worktree", "--json")), &moved))
	wantBranch := "cast/fix-the-parser--" + sess.Id[len(sess.Id)-6:]
	wt := moved.Cwd
	if moved.WorktreeBranch != wantBranch || !strings.HasPrefix(wt, wtDir) || moved.Checkout != repo {
		t.Fatalf("moved to %q on %q (checkout %q), want a worktree under %s on %s", wt, moved.WorktreeBranch, moved.Checkout, wtDir, wantBranch)
	}
	if got := strings.TrimSpace(gitOut(t, wt, "rev-parse", "--abbrev-ref", "HEAD")); got != wantBranch {
		t.Fatalf("worktree on %q", got)
	}
	notice := func(after int64, text string) *castv1.Message {
		for _, m := range r.messages(sess.Id) {
			if m.Seq > after && m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType == "workspace" && strings.Contains(m.Text, text) {
				return m
			}
		}
		return nil
	}
	if notice(0, wt) == nil {
		t.Fatalf("no workspace notice naming %s", wt)
	}
	testharness.WaitFor(t, time.Minute, "the setup's notice", func() bool { return notice(0, "Worktree setup in "+wt+" finished") != nil })
	if _, err := os.Stat(filepath.Join(wt, "SETUP-RAN")); err != nil {
		t.Fatalf("setup did not run in the worktree: %v", err)
	}

	// The next turn runs in the worktree, with the history before the move.
	seq := r.send(sess.Id, "TOOLCALL CMD[pwd] MARK-HIST-2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if pwd := lastToolOutput(r.messages(sess.Id), seq); !samePath(pwd, wt) {
		t.Fatalf("the turn ran in %q, not the worktree %q", pwd, wt)
	}
	sawHistory := false
	for _, req := range r.fake.Turns() {
		var all strings.Builder
		for _, it := range req.Items {
			all.WriteString(it.Text + "\n")
		}
		if strings.Contains(all.String(), "MARK-HIST-2") && strings.Contains(all.String(), "MARK-HIST-1") {
			sawHistory = true
		}
	}
	if !sawHistory {
		t.Fatal("the turn after the move did not carry the history before it")
	}

	type lsJSON struct {
		Worktrees []struct {
			Node, Path, Branch string
			Sessions           []string
			AgentRunning       bool `json:"agent_running"`
			Changes            int
		}
	}
	ls := func() lsJSON {
		var v lsJSON
		must(t, json.Unmarshal([]byte(c.must("worktree", "ls", "--json")), &v))
		return v
	}
	if v := ls(); len(v.Worktrees) != 1 || v.Worktrees[0].Path != wt || v.Worktrees[0].Branch != wantBranch ||
		v.Worktrees[0].Node != "worker" || len(v.Worktrees[0].Sessions) != 1 || v.Worktrees[0].Sessions[0] != sess.Id ||
		v.Worktrees[0].Changes != 0 || v.Worktrees[0].AgentRunning {
		t.Fatalf("worktree ls: %+v", v)
	}

	// Refused while the agent runs there.
	gate := make(chan struct{})
	started := r.fake.TurnsStarted()
	r.fake.Enqueue(fakemodel.Reply{Text: "HELD ANSWER", Gate: gate})
	seq = r.send(sess.Id, "hold on MARK-HIST-3")
	testharness.WaitFor(t, time.Minute, "the turn running", func() bool { return r.fake.TurnsStarted() > started })
	if v := ls(); len(v.Worktrees) != 1 || !v.Worktrees[0].AgentRunning {
		t.Fatalf("worktree ls while a turn runs: %+v", v)
	}
	if _, errOut, code := c.run("worktree", "rm", wt, "--force"); code != 1 || !strings.Contains(errOut, "an agent runs in") {
		t.Fatalf("rm while running: exit %d %q", code, errOut)
	}
	close(gate)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	// Refused with local changes, the count shown.
	must(t, os.WriteFile(filepath.Join(wt, "work.txt"), []byte("work\n"), 0o600))
	gitRun(t, wt, "add", "work.txt")
	gitRun(t, wt, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "work on the branch")
	head := strings.TrimSpace(gitOut(t, wt, "rev-parse", "HEAD"))
	must(t, os.WriteFile(filepath.Join(wt, "a.txt"), []byte("changed\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(wt, "new.txt"), []byte("new\n"), 0o600))
	if _, errOut, code := c.run("worktree", "rm", wt); code != 1 || !strings.Contains(errOut, "has 2 local change(s)") {
		t.Fatalf("rm with changes: exit %d %q", code, errOut)
	}

	// Only paths cast made; hostile names and paths never get through.
	for _, p := range []string{"/etc", repo} {
		if _, errOut, code := c.run("worktree", "rm", p, "--force"); code != 1 || !strings.Contains(errOut, "not a worktree cast made") {
			t.Fatalf("rm %s: exit %d %q", p, code, errOut)
		}
	}
	if _, _, code := c.run("worktree", "rm", "../../etc"); code != 2 {
		t.Fatalf("rm ../../etc: exit %d, want a usage error", code)
	}
	for _, tc := range []*castv1.SetWorkspaceRequest{
		{SessionId: sess.Id, Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: "--upload-pack=x"}}},
		{SessionId: sess.Id, Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: "a..b"}}},
		{SessionId: sess.Id, Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: "ok", Base: "HEAD~1"}}},
		{SessionId: sess.Id, Target: &castv1.SetWorkspaceRequest_Repo{Repo: "../../etc"}},
	} {
		if _, err := r.c.Sessions.SetWorkspace(ctx, tc); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("SetWorkspace(%v): %v", tc.Target, err)
		}
	}
	if _, errOut, code := c.run("workspace", "set", sess.Id, "--repo", "../../etc"); code != 2 || !strings.Contains(errOut, "leaves the checkout") {
		t.Fatalf("--repo ../../etc: exit %d %q", code, errOut)
	}

	// A user sees and removes only worktrees whose sessions are theirs.
	alice := cli{t: t, bin: c.bin, env: append(append([]string{}, c.env...),
		"CAST_TOKEN="+strings.TrimSpace(c.must("token", "create", "--role", "user", "--name", "alice")))}
	if out := alice.must("worktree", "ls", "--json"); strings.Contains(out, wt) {
		t.Fatalf("alice sees another user's worktree: %s", out)
	}
	if _, errOut, code := alice.run("worktree", "rm", wt, "--force"); code != 1 || !strings.Contains(errOut, "not yours") {
		t.Fatalf("alice rm: exit %d %q", code, errOut)
	}

	// Forced: the worktree goes, its branch and commits stay, the thread
	// goes home with a notice and its next turn runs there.
	last := r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 0).LastSeq
	out := c.must("worktree", "rm", wt, "--force")
	if !strings.Contains(out, "keeps its commits") || !strings.Contains(out, sess.Id+" moved back") {
		t.Fatalf("rm --force said %q", out)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("the worktree is still there: %v", err)
	}
	if got := strings.TrimSpace(gitOut(t, repo, "rev-parse", "refs/heads/"+wantBranch)); got != head {
		t.Fatalf("branch %s at %q, want its commit %q", wantBranch, got, head)
	}
	s, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	must(t, err)
	if s.Cwd != repo || s.WorktreeBranch != "" {
		t.Fatalf("after rm: cwd %q branch %q", s.Cwd, s.WorktreeBranch)
	}
	if notice(last, "was removed") == nil {
		t.Fatal("no notice that the worktree was removed")
	}
	seq = r.send(sess.Id, "TOOLCALL CMD[pwd] MARK-HIST-4")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if pwd := lastToolOutput(r.messages(sess.Id), seq); !samePath(pwd, repo) {
		t.Fatalf("the turn after rm ran in %q, not the checkout %q", pwd, repo)
	}
	if v := ls(); len(v.Worktrees) != 0 {
		t.Fatalf("still listed: %+v", v)
	}

	// A fork given --worktree alone gets the default branch name too.
	var fork struct {
		ID             string
		Title          string
		WorktreeBranch string `json:"worktree_branch"`
	}
	must(t, json.Unmarshal([]byte(c.must("fork", sess.Id, "--worktree", "--json")), &fork))
	if want := "cast/fork-of-" + sess.Id + "-fix-the-parser--" + fork.ID[len(fork.ID)-6:]; fork.WorktreeBranch != want {
		t.Fatalf("fork --worktree: branch %q, want %q", fork.WorktreeBranch, want)
	}

	// Deleting a session leaves its worktree and branch alone.
	must(t, json.Unmarshal([]byte(c.must("workspace", "set", sess.Id, "--worktree", "keep/me", "--json")), &moved))
	c.must("rm", sess.Id, "--purge")
	if _, err := os.Stat(moved.Cwd); err != nil {
		t.Fatalf("the worktree went with the session: %v", err)
	}
	gitRun(t, repo, "rev-parse", "--verify", "refs/heads/keep/me")
}

func lastToolOutput(msgs []*castv1.Message, after int64) string {
	out := ""
	for _, m := range msgs {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT && m.Seq > after {
			out = strings.TrimSpace(m.ToolResult.GetOutput())
		}
	}
	return out
}

func samePath(a, b string) bool {
	ra, _ := filepath.EvalSymlinks(a)
	rb, _ := filepath.EvalSymlinks(b)
	return a == b || (ra != "" && ra == rb)
}
