package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo is a git repository with one commit (file a), on main.
func newRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	runGit(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "a"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "add", "a")
	commit(t, repo, "one")
	return repo
}

func commit(t *testing.T, dir, msg string) {
	t.Helper()
	runGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", msg)
}

// wsAgent is a node core with real state in a scratch data dir.
func wsAgent(t *testing.T) *Daemon {
	t.Helper()
	dir := t.TempDir()
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Daemon{cfg: Config{DataDir: filepath.Join(dir, "node"), Name: "n1"}, lg: zap.NewNop(), st: st, runCtx: t.Context()}
}

func TestEnsureWorktree(t *testing.T) {
	repo := newRepo(t)
	runGit(t, repo, "branch", "existing")
	a := wsAgent(t)
	ctx := context.Background()

	// A new branch, then the same call again: one worktree, reused.
	p1, made, err := a.ensureWorktree(ctx, repo, "feat/x")
	if err != nil || !made || runGit(t, p1, "rev-parse", "--abbrev-ref", "HEAD") != "feat/x" {
		t.Fatalf("new branch: %q %v %v", p1, made, err)
	}
	if real, _ := filepath.EvalSymlinks(a.cfg.worktreesDir()); !strings.HasPrefix(p1, a.cfg.worktreesDir()) || within(a.cfg.DataDir, real) {
		t.Fatalf("worktree %s is not beside the data dir %s", p1, a.cfg.DataDir)
	}
	if again, made, err := a.ensureWorktree(ctx, repo, "feat/x"); err != nil || made || again != p1 {
		t.Fatalf("second call: %q %v %v, want %q", again, made, err, p1)
	}
	// From inside the worktree: already on the branch.
	if same, _, err := a.ensureWorktree(ctx, p1, "feat/x"); err != nil || same != p1 {
		t.Fatalf("from the worktree: %q %v", same, err)
	}
	// An existing branch is checked out, not recreated.
	p2, _, err := a.ensureWorktree(ctx, repo, "existing")
	if err != nil || runGit(t, p2, "rev-parse", "--abbrev-ref", "HEAD") != "existing" {
		t.Fatalf("existing branch: %q %v", p2, err)
	}
	if recs, _ := a.st.worktrees(); len(recs) != 2 {
		t.Fatalf("recorded worktrees %v, want the 2 made", recs)
	}
	// A worktree an older node made in DATA_DIR/worktrees is recorded
	// when a turn finds it.
	old := filepath.Join(a.cfg.DataDir, "worktrees", "app", "old")
	runGit(t, repo, "worktree", "add", "-q", "-b", "old", old)
	if p, made, err := a.ensureWorktree(ctx, old, "old"); err != nil || made || p != old {
		t.Fatalf("old worktree: %q %v %v", p, made, err)
	}
	if recs, _ := a.st.worktrees(); len(recs) != 3 {
		t.Fatalf("recorded worktrees %v, want the old one too", recs)
	}
	// A checkout on the branch is not a worktree cast made.
	runGit(t, repo, "checkout", "-q", "-b", "onmain")
	if _, _, err := a.ensureWorktree(ctx, repo, "onmain"); err != nil {
		t.Fatal(err)
	}
	if recs, _ := a.st.worktrees(); len(recs) != 3 {
		t.Fatalf("recorded worktrees %v: the checkout itself was recorded", recs)
	}
	for _, tc := range []struct{ cwd, branch, want string }{
		{repo, "-x", "not a valid branch name"},
		{repo, "a..b", "not a valid branch name"},
		{t.TempDir(), "ok", "needs a git checkout"},
	} {
		if _, _, err := a.ensureWorktree(ctx, tc.cwd, tc.branch); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ensureWorktree(%s, %s) = %v, want %q", tc.cwd, tc.branch, err, tc.want)
		}
	}
	// A path in the way that is not a worktree is left alone.
	blocked, _ := filepath.Split(p1)
	if err := os.MkdirAll(filepath.Join(blocked, "feat%2Fy"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.ensureWorktree(ctx, repo, "feat/y"); err == nil || !strings.Contains(err.Error(), "is not a worktree on feat/y") {
		t.Fatalf("blocked path: %v", err)
	}
	// A base inside the checkout is refused, also through a symlink.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(repo, link); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{filepath.Join(repo, "wt"), filepath.Join(link, "wt")} {
		a.cfg.WorktreeBase = base
		if _, _, err := a.ensureWorktree(ctx, repo, "feat/z"); err == nil || !strings.Contains(err.Error(), "inside the checkout") {
			t.Fatalf("base %s inside: %v", base, err)
		}
	}
}

// Setup commands come from the node's own file only, run in order, and a
// failure says which command and why.
func TestWorktreeSetup(t *testing.T) {
	repo := newRepo(t)
	cfgPath := filepath.Join(t.TempDir(), "setup.json")
	write := func(body string, mode os.FileMode) {
		if err := os.WriteFile(cfgPath, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfgPath, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"`+repo+`": [["touch", "SETUP-1"], ["mkdir", "SETUP-2"]]}`, 0o644)
	ws, err := LoadWorktreeSetup(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ran, err := ws.run(context.Background(), repo, dir)
	if err != nil || len(ran) != 2 {
		t.Fatalf("run: %v %v", ran, err)
	}
	for _, f := range []string{"SETUP-1", "SETUP-2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("setup did not run: %v", err)
		}
	}
	write(`{"`+repo+`": [["true"], ["false"], ["touch", "NEVER"]]}`, 0o600)
	if ws, err = LoadWorktreeSetup(cfgPath); err != nil {
		t.Fatal(err)
	}
	if ran, err := ws.run(context.Background(), repo, dir); err == nil || len(ran) != 1 || !strings.Contains(err.Error(), "`false` failed") {
		t.Fatalf("failing setup: %v %v", ran, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "NEVER")); err == nil {
		t.Fatal("a command after the failure ran")
	}
	// The limit stops a command that runs too long, and says so.
	write(`{"`+repo+`": [["sleep", "30"]]}`, 0o600)
	if ws, err = LoadWorktreeSetup(cfgPath); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ws.run(short, repo, dir); err == nil || !strings.Contains(err.Error(), "stopped after") || time.Since(start) > 10*time.Second {
		t.Fatalf("a setup past its limit: %v after %s", err, time.Since(start))
	}
	for _, bad := range []struct {
		body string
		mode os.FileMode
		want string
	}{
		{`{}`, 0o666, "writable by others"},
		{`{"rel": [["x"]]}`, 0o600, "must be an absolute path"},
		{`{"/x": [[]]}`, 0o600, "empty command"},
		{`[1]`, 0o600, "want {"},
	} {
		write(bad.body, bad.mode)
		if _, err := LoadWorktreeSetup(cfgPath); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("LoadWorktreeSetup(%s, %o) = %v, want %q", bad.body, bad.mode, err, bad.want)
		}
	}
}

// gitLog puts a git on PATH that logs every call's arguments and runs the
// real one; it returns the log's path.
func gitLog(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "git.log")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + log + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// recorder is a commitMoves that keeps what it was given.
type recorder struct{ moves []*castv1.WorkspaceMove }

func (r *recorder) commit(_ context.Context, m []*castv1.WorkspaceMove) error {
	r.moves = append(r.moves, m...)
	return nil
}

func ownSession(t *testing.T, a *Daemon, id, cwd string) {
	t.Helper()
	err := a.st.update(func(m map[string]*owned) {
		m[id] = &owned{Token: 7, Agent: "claude", Cwd: cwd, Native: map[string]*nativeSession{"claude": {ID: "n1", KnownUpto: 3}}}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Hostile names and paths are refused before git ever sees them: git is
// never run with them, and a symlink that leads out of the checkout is
// refused before git runs in its target.
func TestWorkspaceRefusesHostileInput(t *testing.T) {
	repo := newRepo(t)
	outside := newRepo(t) // a real repository, so only the escape check can refuse it
	if err := os.Symlink(outside, filepath.Join(repo, "escape")); err != nil {
		t.Fatal(err)
	}
	log := gitLog(t)
	a := wsAgent(t)
	const id = "sess0001"
	ownSession(t, a, id, repo)
	var rec recorder
	wt := func(branch, base string) *castv1.SetWorkspaceRequest {
		return &castv1.SetWorkspaceRequest{SessionId: id, Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: branch, Base: base}}}
	}
	repoReq := func(p string) *castv1.SetWorkspaceRequest {
		return &castv1.SetWorkspaceRequest{SessionId: id, Target: &castv1.SetWorkspaceRequest_Repo{Repo: p}}
	}
	for _, tc := range []struct {
		name    string
		op      *castv1.SetWorkspaceRequest
		hostile string // never in git's arguments
	}{
		{"branch option", wt("--upload-pack=x", ""), "upload-pack"},
		{"branch range", wt("a..b", ""), "a..b"},
		{"branch rev", wt("HEAD~1", ""), "HEAD~1"},
		{"base option", wt("ok", "--upload-pack=x"), "upload-pack"},
		{"base rev", wt("ok", "HEAD~1"), "HEAD~1"},
		{"repo dotdot", repoReq("../../etc"), "etc"},
		{"repo option", repoReq("--upload-pack=x"), "upload-pack"},
		{"repo absolute", repoReq("/etc"), "/etc"},
		{"repo symlink escape", repoReq("escape"), outside},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(log)
			err := a.setWorkspace(context.Background(), tc.op, rec.commit)
			if err == nil {
				t.Fatal("accepted")
			}
			b, _ := os.ReadFile(log)
			if strings.Contains(string(b), tc.hostile) {
				t.Fatalf("git ran with it (%v):\n%s", err, b)
			}
		})
	}
	if len(rec.moves) != 0 {
		t.Fatalf("refused moves were committed: %v", rec.moves)
	}
	if o, _ := a.st.get(id); o.Cwd != repo || o.Native == nil {
		t.Fatalf("a refused move changed the session: %+v", o)
	}
	// Removal takes only a path cast made: /etc, the checkout and a
	// relative path are refused before any git runs.
	for _, p := range []string{"/etc", repo, "../../etc", "--upload-pack=x"} {
		_ = os.Remove(log)
		if _, err := a.removeWorktree(context.Background(), p, true, rec.commit); err == nil {
			t.Fatalf("removeWorktree(%s) accepted", p)
		}
		if b, _ := os.ReadFile(log); len(b) > 0 {
			t.Fatalf("removeWorktree(%s): git ran:\n%s", p, b)
		}
	}
}

// A session moves into a new worktree, its native sessions reset; removal
// is refused with local changes (the count shown) and while a turn holds
// the session; a forced removal keeps the branch and its commits, and
// moves the session back to its checkout with a notice.
func TestWorkspaceMoveAndRemove(t *testing.T) {
	repo := newRepo(t)
	if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	runGit(t, filepath.Join(repo, "sub"), "init", "-q", "-b", "main")
	a := wsAgent(t)
	ctx := context.Background()
	const id = "sess0002"
	ownSession(t, a, id, repo)
	var rec recorder

	// A repository under the checkout.
	if err := a.setWorkspace(ctx, &castv1.SetWorkspaceRequest{SessionId: id, Target: &castv1.SetWorkspaceRequest_Repo{Repo: "sub"}}, rec.commit); err != nil {
		t.Fatal(err)
	}
	sub, _ := filepath.EvalSymlinks(filepath.Join(repo, "sub"))
	if o, _ := a.st.get(id); o.Cwd != sub || o.Native != nil || o.Checkout != repo {
		t.Fatalf("after --repo: %+v", o)
	}
	// Back to the checkout.
	if err := a.setWorkspace(ctx, &castv1.SetWorkspaceRequest{SessionId: id, Target: &castv1.SetWorkspaceRequest_Root{Root: true}}, rec.commit); err != nil {
		t.Fatal(err)
	}
	if o, _ := a.st.get(id); o.Cwd != repo || o.Checkout != repo {
		t.Fatalf("after --root: %+v", o)
	}
	// A new worktree of the checkout's repository, on a new branch.
	op := &castv1.SetWorkspaceRequest{SessionId: id, Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: "feat/w"}}}
	if err := a.setWorkspace(ctx, op, rec.commit); err != nil {
		t.Fatal(err)
	}
	o, _ := a.st.get(id)
	if o.WorktreeBranch != "feat/w" || within(repo, o.Cwd) || runGit(t, o.Cwd, "rev-parse", "--abbrev-ref", "HEAD") != "feat/w" {
		t.Fatalf("after --worktree: %+v", o)
	}
	wtPath := o.Cwd
	if n := len(rec.moves); n != 3 || !strings.Contains(rec.moves[2].Notice, wtPath) || rec.moves[2].OwnerToken != 7 {
		t.Fatalf("moves %v", rec.moves)
	}
	list := a.listWorktrees(ctx)
	if len(list) != 1 || list[0].Path != wtPath || list[0].Branch != "feat/w" || list[0].Changes != 0 ||
		len(list[0].Sessions) != 1 || list[0].Sessions[0] != id || list[0].AgentRunning {
		t.Fatalf("ls: %v", list)
	}

	// Work in it: a commit, then two uncommitted files.
	if err := os.WriteFile(filepath.Join(wtPath, "b"), []byte("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	runGit(t, wtPath, "add", "b")
	commit(t, wtPath, "work on feat/w")
	head := runGit(t, wtPath, "rev-parse", "HEAD")
	for _, f := range []string{"c", "d"} {
		if err := os.WriteFile(filepath.Join(wtPath, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.removeWorktree(ctx, wtPath, false, rec.commit); err == nil || !strings.Contains(err.Error(), "has 2 local change(s)") {
		t.Fatalf("dirty removal: %v", err)
	}
	// A session held by a turn (or another move) keeps its worktree.
	release, ok := a.hold(id)
	if !ok {
		t.Fatal("hold")
	}
	if _, err := a.removeWorktree(ctx, wtPath, true, rec.commit); err == nil || !strings.Contains(err.Error(), "an agent runs in") {
		t.Fatalf("busy removal: %v", err)
	}
	release()
	if _, err := os.Stat(wtPath); err != nil {
		t.Fatalf("refused removals touched the worktree: %v", err)
	}

	before := len(rec.moves)
	w, err := a.removeWorktree(ctx, wtPath, true, rec.commit)
	if err != nil {
		t.Fatal(err)
	}
	if w.Changes != 2 || len(w.Sessions) != 1 {
		t.Fatalf("removed %v", w)
	}
	if _, err := os.Stat(wtPath); !os.IsNotExist(err) {
		t.Fatalf("worktree still there: %v", err)
	}
	if got := runGit(t, repo, "rev-parse", "refs/heads/feat/w"); got != head {
		t.Fatalf("branch feat/w at %q, want %q (its commit)", got, head)
	}
	back := rec.moves[before:]
	if len(back) != 1 || back[0].Cwd != repo || back[0].WorktreeBranch != "" || !strings.Contains(back[0].Notice, "feat/w keeps its commits") {
		t.Fatalf("moves back: %v", back)
	}
	if o, _ := a.st.get(id); o.Cwd != repo || o.WorktreeBranch != "" || o.Native != nil {
		t.Fatalf("session after removal: %+v", o)
	}
	if l := a.listWorktrees(ctx); len(l) != 0 {
		t.Fatalf("still listed: %v", l)
	}
}

// An assignment that puts a session in another folder drops its native
// sessions; a worktree session whose stored cwd is still its checkout
// keeps them.
func TestMovedAway(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    owned
		s    *castv1.Session
		want bool
	}{
		{"same folder", owned{Cwd: "/src/app"}, &castv1.Session{Cwd: "/src/app/"}, false},
		{"new node state", owned{}, &castv1.Session{Cwd: "/src/app"}, false},
		{"moved", owned{Cwd: "/src/app"}, &castv1.Session{Cwd: "/wt/feat", WorktreeBranch: "feat"}, true},
		{"worktree, cwd not reported yet", owned{Cwd: "/wt/feat", WorktreeBranch: "feat"}, &castv1.Session{Cwd: "/src/app", WorktreeBranch: "feat"}, false},
		{"worktree to checkout", owned{Cwd: "/wt/feat", WorktreeBranch: "feat"}, &castv1.Session{Cwd: "/src/app"}, true},
	} {
		if got := movedAway(tc.o, tc.s); got != tc.want {
			t.Errorf("%s: movedAway = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A refusal keeps its stable reason, whether the node made it or the
// control plane refused a move.
func TestRefusalReason(t *testing.T) {
	st, err := status.New(codes.FailedPrecondition, "session s is moving").WithDetails(&errdetails.ErrorInfo{Reason: errs.ReasonSessionFenced})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err              error
		wantMsg, wantWhy string
	}{
		{errs.New(errs.KindFailedPrecondition, errs.ReasonWorktreeDirty, "3 changes"), "3 changes", errs.ReasonWorktreeDirty},
		{st.Err(), "session s is moving", errs.ReasonSessionFenced},
		{fmt.Errorf("disk full"), "disk full", errs.ReasonWorkspaceFailed},
	} {
		if msg, why := refusal(tc.err); msg != tc.wantMsg || why != tc.wantWhy {
			t.Errorf("refusal(%v) = %q %q, want %q %q", tc.err, msg, why, tc.wantMsg, tc.wantWhy)
		}
	}
}

// Any branch cast accepts gets a worktree: its folder is named after the
// branch escaped, which for a long branch of non-ASCII letters or many
// '/' ran past a file name's 255 bytes, so git failed to make it and the
// turn failed after the message was accepted.
func TestWorktreeForLongBranch(t *testing.T) {
	repo := newRepo(t)
	a := wsAgent(t)
	for _, branch := range []string{
		strings.Repeat("ü", 100),       // 200 bytes, 600 escaped
		strings.Repeat("a/", 99) + "b", // 199 bytes, 397 escaped
		strings.Repeat("ü", 99) + "x",  // differs from the first only past any cut
		"日本語/ブランチ",                     // short: its plain escaped name
	} {
		p, made, err := a.ensureWorktree(context.Background(), repo, branch)
		if err != nil || !made {
			t.Fatalf("branch %q (%d bytes): %q %v %v", branch, len(branch), p, made, err)
		}
		if got := runGit(t, p, "rev-parse", "--abbrev-ref", "HEAD"); got != branch {
			t.Fatalf("worktree %s is on %q, want %q", p, got, branch)
		}
		if n := len(filepath.Base(p)); n > 255 {
			t.Fatalf("worktree folder name of %d bytes", n)
		}
	}
}

// A fork of a thread that works in a worktree gets its own worktree from
// the thread's HEAD (the commits the conversation made there), not from
// the main checkout's; likewise `cast workspace set --worktree` with no
// base.
func TestWorktreeOfAWorktreeThreadStartsAtItsHead(t *testing.T) {
	repo := newRepo(t)
	a := wsAgent(t)
	ctx := context.Background()
	p1, _, err := a.ensureWorktree(ctx, repo, "feat/parent")
	if err != nil {
		t.Fatal(err)
	}
	commit(t, p1, "the parent's work")
	want := runGit(t, p1, "rev-parse", "HEAD")
	if runGit(t, repo, "rev-parse", "HEAD") == want {
		t.Fatal("the parent's commit is on main too")
	}
	fork, made, err := a.ensureWorktree(ctx, p1, "feat/fork")
	if err != nil || !made {
		t.Fatalf("fork's worktree: %q %v %v", fork, made, err)
	}
	if got := runGit(t, fork, "rev-parse", "HEAD"); got != want {
		t.Errorf("fork's worktree starts at %s, want the parent's HEAD %s", got, want)
	}
	// cast workspace set --worktree with no base, from the worktree.
	const id = "sess0009"
	ownSession(t, a, id, p1)
	var rec recorder
	op := &castv1.SetWorkspaceRequest{SessionId: id, Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: "feat/ws"}}}
	if err := a.setWorkspace(ctx, op, rec.commit); err != nil {
		t.Fatal(err)
	}
	if o, _ := a.st.get(id); runGit(t, o.Cwd, "rev-parse", "HEAD") != want {
		t.Errorf("workspace set --worktree from the worktree starts at %s, want %s", runGit(t, o.Cwd, "rev-parse", "HEAD"), want)
	}
	// In the main checkout the thread's HEAD is the checkout's.
	p3, _, err := a.ensureWorktree(ctx, repo, "feat/main")
	if err != nil || runGit(t, p3, "rev-parse", "HEAD") != runGit(t, repo, "rev-parse", "HEAD") {
		t.Fatalf("from the checkout: %q %v", p3, err)
	}
}

// Two sessions on one worktree branch whose first turns start together
// (`cast spawn` of a worker before its parent's first turn in a new
// worktree ran: moves.BranchBeside gives the worker the parent's branch)
// both found no worktree and both ran `git worktree add`: one failed
// ("already exists") and its turn was not set up. One makes it now, the
// other waits and takes it; both turns run there, and one worktree is
// recorded (and set up once). The failpoints hold the first maker just
// before `git worktree add` until the second gets as far as it can: to
// its own `git worktree add` (no lock), or to waiting for the first.
func TestFirstTurnsOnOneBranchShareItsWorktree(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p := rerunDaemon(t, fm)
	repo := newRepo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		mu     sync.Mutex
		makers int
		second = make(chan struct{})
		once   sync.Once
	)
	arrived := func() { once.Do(func() { close(second) }) }
	a.cfg.Failpoint = func(name string) {
		switch name {
		case "node.worktree-add":
			mu.Lock()
			makers++
			first := makers == 1
			mu.Unlock()
			if !first {
				arrived()
				return
			}
			select {
			case <-second:
			case <-ctx.Done():
			}
		case "node.worktree-busy":
			arrived()
		}
	}
	ids := []string{"parent", "worker"}
	for _, id := range ids {
		_ = p.add(id, &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hello from " + id, ClientId: "u-" + id})
		if err := a.st.assign(id, func(o *owned) {
			o.Token, o.Agent, o.Cwd, o.WorktreeBranch = 1, "claude", repo, "feat/x"
			o.ReceivedSeq = 1
		}); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, len(ids))
	for _, id := range ids {
		o, _ := a.st.get(id)
		go func() { errc <- a.runTurn(ctx, id, o) }()
	}
	for range ids {
		if err := <-errc; err != nil {
			t.Errorf("a first turn on the shared branch: %v", err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	parent, _ := a.st.get("parent")
	worker, _ := a.st.get("worker")
	if parent.Cwd == repo || parent.Cwd != worker.Cwd || runGit(t, parent.Cwd, "rev-parse", "--abbrev-ref", "HEAD") != "feat/x" {
		t.Fatalf("turns ran in %s and %s, want one worktree on feat/x", parent.Cwd, worker.Cwd)
	}
	if parent.DeliveredSeq != 1 || worker.DeliveredSeq != 1 {
		t.Fatalf("delivered seqs %d and %d, want both 1", parent.DeliveredSeq, worker.DeliveredSeq)
	}
	if recs, _ := a.st.worktrees(); len(recs) != 1 {
		t.Fatalf("recorded worktrees %v, want the one made", recs)
	}
}
