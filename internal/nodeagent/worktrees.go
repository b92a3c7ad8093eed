package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/workspace"
)

// A session with a worktree branch runs in a git worktree of its own, so
// a fork (or a second thread) never edits the checkout its parent works
// in. The node makes it on the session's first turn, outside the
// checkout, and the session's cwd becomes the worktree. Worktrees are never
// removed by cast; `git worktree remove` does it and keeps the branch.

// ensureWorktree returns the directory the session's turns run in: cwd
// itself when it is already on the branch (a worktree made earlier, or a
// checkout that migrated here on it), else a worktree made for the branch.
func (a *Agent) ensureWorktree(ctx context.Context, cwd, branch string) (string, error) {
	if !ids.ValidBranch(branch) {
		return "", fmt.Errorf("worktree branch %q is not a valid branch name", branch)
	}
	if _, err := workspace.Git(ctx, cwd, 0, nil, "check-ref-format", "--branch", branch); err != nil {
		return "", fmt.Errorf("worktree branch %q: %w", branch, err)
	}
	out, err := workspace.Git(ctx, cwd, 0, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("a worktree needs a git checkout at %s: %w", cwd, err)
	}
	top := strings.TrimSpace(string(out))
	if onBranch(ctx, cwd, branch) {
		return cwd, nil // the worktree itself (set up when made), or a checkout already on it
	}
	base, err := a.worktreeBase(top)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(top))
	path := filepath.Join(base, filepath.Base(top)+"-"+hex.EncodeToString(sum[:4]), url.PathEscape(branch))
	switch _, err := os.Stat(path); {
	case err == nil:
		if onBranch(ctx, path, branch) {
			return path, a.setUp(ctx, top, path) // made by an earlier turn whose report was lost
		}
		return "", fmt.Errorf("%s exists and is not a worktree on %s; move it away", path, branch)
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	args := []string{"worktree", "add", "-b", branch, path, "HEAD"}
	if _, err := workspace.Git(ctx, top, 0, nil, "show-ref", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
		args = []string{"worktree", "add", path, branch} // the branch exists: check it out
	}
	if _, err := workspace.Git(ctx, top, 0, nil, args...); err != nil {
		return "", fmt.Errorf("make the worktree for %s: %w", branch, err)
	}
	a.lg.Info("worktree made", zap.String("branch", branch), zap.String("path", path), zap.String("from", top))
	return path, a.setUp(ctx, top, path)
}

// setUp runs the checkout's setup commands in dir once: a marker in the
// worktree's own git dir records success, so a failed setup runs again on
// the next turn and a finished one never does.
func (a *Agent) setUp(ctx context.Context, top, dir string) error {
	if len(a.cfg.WorktreeSetup.commands(top)) == 0 {
		return nil
	}
	out, err := workspace.Git(ctx, dir, 0, nil, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return err
	}
	marker := filepath.Join(strings.TrimSpace(string(out)), "cast-setup-done")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	if err := a.cfg.WorktreeSetup.run(ctx, top, dir); err != nil {
		return err
	}
	return os.WriteFile(marker, nil, 0o600)
}

// worktreeBase is the configured base, refused when it lies inside the
// checkout (real paths compared): the worktree would show up in it.
func (a *Agent) worktreeBase(top string) (string, error) {
	base := a.cfg.WorktreeBase
	if base == "" {
		base = filepath.Join(a.cfg.DataDir, "worktrees")
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	inside, err := fsutil.Within(base, top)
	if err != nil {
		return "", err
	}
	if inside {
		return "", fmt.Errorf("the worktree base %s is inside the checkout %s; give the node a --worktree-base outside it", base, top)
	}
	return base, nil
}

func onBranch(ctx context.Context, dir, branch string) bool {
	out, err := workspace.Git(ctx, dir, 0, nil, "rev-parse", "--abbrev-ref", "HEAD")
	return err == nil && strings.TrimSpace(string(out)) == branch
}
