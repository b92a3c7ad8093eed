package nodeagent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestEnsureWorktree(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "a"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "a")
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
	git(t, repo, "branch", "existing")
	a := &Agent{cfg: Config{DataDir: t.TempDir()}, lg: zap.NewNop()}
	ctx := context.Background()

	// A new branch, then the same call again: one worktree, reused.
	p1, err := a.ensureWorktree(ctx, repo, "feat/x")
	if err != nil || git(t, p1, "rev-parse", "--abbrev-ref", "HEAD") != "feat/x" {
		t.Fatalf("new branch: %q %v", p1, err)
	}
	if again, err := a.ensureWorktree(ctx, repo, "feat/x"); err != nil || again != p1 {
		t.Fatalf("second call: %q %v, want %q", again, err, p1)
	}
	// From inside the worktree: already on the branch.
	if same, err := a.ensureWorktree(ctx, p1, "feat/x"); err != nil || same != p1 {
		t.Fatalf("from the worktree: %q %v", same, err)
	}
	// An existing branch is checked out, not recreated.
	p2, err := a.ensureWorktree(ctx, repo, "existing")
	if err != nil || git(t, p2, "rev-parse", "--abbrev-ref", "HEAD") != "existing" {
		t.Fatalf("existing branch: %q %v", p2, err)
	}
	for _, tc := range []struct{ cwd, branch, want string }{
		{repo, "-x", "not a valid branch name"},
		{repo, "a..b", "not a valid branch name"},
		{t.TempDir(), "ok", "needs a git checkout"},
	} {
		if _, err := a.ensureWorktree(ctx, tc.cwd, tc.branch); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ensureWorktree(%s, %s) = %v, want %q", tc.cwd, tc.branch, err, tc.want)
		}
	}
	// A path in the way that is not on the branch is left alone.
	blocked, _ := filepath.Split(p1)
	if err := os.MkdirAll(filepath.Join(blocked, "feat%2Fy"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ensureWorktree(ctx, repo, "feat/y"); err == nil || !strings.Contains(err.Error(), "is not a worktree on feat/y") {
		t.Fatalf("blocked path: %v", err)
	}
	// A base inside the checkout is refused.
	a.cfg.WorktreeBase = filepath.Join(repo, "wt")
	if _, err := a.ensureWorktree(ctx, repo, "feat/z"); err == nil || !strings.Contains(err.Error(), "inside the checkout") {
		t.Fatalf("base inside: %v", err)
	}
}

// Setup commands from the node's own file run once in each new worktree of
// the listed checkout; a failing one fails the turn and runs again on the
// next, and a file others can write is refused.
func TestWorktreeSetup(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "one")
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
	a := &Agent{cfg: Config{DataDir: t.TempDir(), WorktreeSetup: ws}, lg: zap.NewNop()}
	ctx := context.Background()
	p, err := a.ensureWorktree(ctx, repo, "feat/setup")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"SETUP-1", "SETUP-2"} {
		if _, err := os.Stat(filepath.Join(p, f)); err != nil {
			t.Fatalf("setup did not run: %v", err)
		}
	}
	if err := os.Remove(filepath.Join(p, "SETUP-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ensureWorktree(ctx, repo, "feat/setup"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p, "SETUP-1")); err == nil {
		t.Fatal("setup ran twice in one worktree")
	}

	// A failing command fails the call; the next call runs the setup
	// again in the same worktree.
	load := func(body string) {
		write(body, 0o600)
		if a.cfg.WorktreeSetup, err = LoadWorktreeSetup(cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	load(`{"` + repo + `": [["false"]]}`)
	if _, err := a.ensureWorktree(ctx, repo, "feat/fails"); err == nil || !strings.Contains(err.Error(), "worktree setup `false` failed") {
		t.Fatalf("failing setup: %v", err)
	}
	load(`{"` + repo + `": [["touch", "FIXED"]]}`)
	p3, err := a.ensureWorktree(ctx, repo, "feat/fails")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p3, "FIXED")); err != nil {
		t.Fatalf("setup not run again after a failure: %v", err)
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
