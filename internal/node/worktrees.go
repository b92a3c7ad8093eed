package node

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

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/git"
	"github.com/cast-dev/cast/internal/ids"
)

// A session with a worktree branch runs in a git worktree of its own, so
// a fork (or a second thread) never edits the checkout its parent works
// in. The node makes it on the session's first turn (or on `cast workspace
// set --worktree`), outside the checkout, and the session's cwd becomes
// the worktree. cast records every worktree it makes (`cast worktree ls`)
// and removes one only when asked (`cast worktree rm`), never its branch.

// ensureWorktree returns the directory the session's turns run in: cwd
// itself when it is already on the branch (a worktree made earlier, or a
// checkout that migrated here on it), else a worktree for the branch.
// made reports a worktree made now (its setup is the caller's to start).
func (a *Daemon) ensureWorktree(ctx context.Context, cwd, branch string) (dir string, made bool, err error) {
	if !ids.ValidBranch(branch) {
		return "", false, invalidf("worktree branch %q is not a valid branch name", branch)
	}
	if onBranch(ctx, cwd, branch) {
		a.adoptWorktree(ctx, cwd, branch)
		return cwd, false, nil // the worktree itself (set up when made), or a checkout already on it
	}
	top, err := mainCheckout(ctx, cwd)
	if err != nil {
		return "", false, fmt.Errorf("a worktree needs a git checkout at %s: %w", cwd, err)
	}
	return a.worktreeFor(ctx, top, branch, threadHead(ctx, cwd))
}

// threadHead is the commit a new worktree of a thread working in cwd
// starts from when no base is named: cwd's HEAD, so a fork of a thread in
// a worktree (or the thread moving to another) keeps the commits its
// conversation made there; in the main checkout it is the checkout's HEAD.
// Empty (the main checkout's HEAD) when cwd has no commit.
func threadHead(ctx context.Context, cwd string) string {
	out, err := git.Run(ctx, cwd, 0, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// worktreeFor returns the worktree of the repository whose main checkout
// is top for branch: the one git already has on it, else a new one under
// the worktree base, from base (HEAD when empty) for a new branch.
func (a *Daemon) worktreeFor(ctx context.Context, top, branch, base string) (string, bool, error) {
	if !ids.ValidBranch(branch) {
		return "", false, invalidf("worktree branch %q is not a valid branch name", branch)
	}
	if base != "" && !ids.ValidBranch(base) {
		return "", false, invalidf("base %q is not a branch, tag or commit name", base)
	}
	// git's own rule, on top of ours (both refuse a leading '-').
	if _, err := git.Run(ctx, top, 0, nil, "check-ref-format", "--branch", branch); err != nil {
		return "", false, invalidf("worktree branch %q: %v", branch, err)
	}
	// Two first turns on one branch (a worker spawned beside its parent,
	// moves.BranchBeside) come together: one makes the worktree while the
	// other waits, then finds it.
	path := a.worktreePath(top, branch)
	unlock, err := a.lockWorktree(ctx, path)
	if err != nil {
		return "", false, err
	}
	defer unlock()
	if p, ok := worktreeOn(ctx, top, branch); ok {
		return p, false, nil
	}
	if _, err := a.worktreeBase(top); err != nil {
		return "", false, err
	}
	switch _, err := os.Stat(path); {
	case err == nil:
		return "", false, fmt.Errorf("%s exists and is not a worktree on %s; move it away", path, branch)
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	args := []string{"worktree", "add", "-b", branch, path}
	if _, err := git.Run(ctx, top, 0, nil, "show-ref", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
		args = []string{"worktree", "add", path, branch} // the branch exists: check it out
	} else {
		if base == "" {
			base = "HEAD"
		}
		if _, err := git.Run(ctx, top, 0, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", base+"^{commit}"); err != nil {
			return "", false, invalidf("base %q is not a commit in %s", base, top)
		}
		args = append(args, base)
	}
	a.failpoint("node.worktree-add") // checked, not made yet: a fault test holds a maker here
	if _, err := git.Run(ctx, top, 0, nil, args...); err != nil {
		if p, ok := worktreeOn(ctx, top, branch); ok {
			return p, false, nil // made meanwhile outside this node (the lock is the node's): the worktree asked for
		}
		return "", false, fmt.Errorf("make the worktree for %s: %w", branch, err)
	}
	if err := a.st.addWorktree(worktreeRec{Path: path, Branch: branch, Checkout: top}); err != nil {
		return "", false, err
	}
	a.lg.Info("worktree made", zap.String("branch", branch), zap.String("path", path), zap.String("from", top))
	return path, true, nil
}

// worktreePath is where the node makes branch's worktree of the
// repository whose main checkout is top: under the worktree base, in a
// folder per checkout.
func (a *Daemon) worktreePath(top, branch string) string {
	sum := sha256.Sum256([]byte(top))
	return filepath.Join(a.cfg.worktreesDir(), filepath.Base(top)+"-"+hex.EncodeToString(sum[:4]), worktreeDirName(branch))
}

// lockWorktree takes the node's lock on the worktree at path, waiting
// while another turn (or a workspace move) makes it, or until ctx ends.
func (a *Daemon) lockWorktree(ctx context.Context, path string) (unlock func(), err error) {
	if unlock, ok := a.worktreeLocks.TryLock(path); ok {
		return unlock, nil
	}
	a.failpoint("node.worktree-busy") // another maker holds it: a fault test lets it go on
	return a.worktreeLocks.Lock(ctx, path)
}

// worktreeDirName is the folder of branch's worktree: the branch escaped
// into one path element, cut with a hash of the branch after it when that
// runs past what a file name may hold (255 bytes): a valid branch of 200
// bytes escapes to up to 600 ('ü' is %C3%BC), and git failed to make it.
func worktreeDirName(branch string) string {
	const most = 200
	name := url.PathEscape(branch)
	if len(name) <= most {
		return name
	}
	cut := most - 17 // "-" and 16 hex digits
	if i := strings.LastIndexByte(name[:cut], '%'); i >= cut-2 {
		cut = i // not inside an escape
	}
	sum := sha256.Sum256([]byte(branch))
	return name[:cut] + "-" + hex.EncodeToString(sum[:8])
}

// adoptWorktree records a worktree made before the node kept a record (in
// its worktrees dir, or DATA_DIR/worktrees where older nodes made them),
// so `cast worktree ls` shows it too.
func (a *Daemon) adoptWorktree(ctx context.Context, dir, branch string) {
	recs, _ := a.st.worktrees()
	for _, r := range recs {
		if r.Path == dir {
			return
		}
	}
	if !within(a.cfg.worktreesDir(), dir) && !within(filepath.Join(a.cfg.DataDir, "worktrees"), dir) {
		return
	}
	top, err := mainCheckout(ctx, dir)
	if err != nil || top == dir {
		return
	}
	if err := a.st.addWorktree(worktreeRec{Path: dir, Branch: branch, Checkout: top}); err != nil {
		a.lg.Warn("worktree not recorded", zap.String("path", dir), zap.Error(err))
	}
}

// worktreeBase is the configured base (default beside the data dir),
// refused when it lies inside the checkout (real paths compared): the
// worktree would show up in it.
func (a *Daemon) worktreeBase(top string) (string, error) {
	base := a.cfg.worktreesDir()
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	inside, err := fsutil.Within(base, top)
	if err != nil {
		return "", err
	}
	if inside {
		return "", errs.New(errs.KindFailedPrecondition, errs.ReasonWorkspaceFailed,
			"the worktrees dir %s is inside the checkout %s; start the node with a --worktrees-dir outside it", base, top)
	}
	return base, nil
}

// within reports whether path is dir or inside it, real paths compared;
// false when either cannot be resolved.
func within(dir, path string) bool {
	in, err := fsutil.Within(path, dir)
	return err == nil && in
}

func onBranch(ctx context.Context, dir, branch string) bool {
	out, err := git.Run(ctx, dir, 0, nil, "rev-parse", "--abbrev-ref", "HEAD")
	return err == nil && strings.TrimSpace(string(out)) == branch
}

// gitWorktree is one entry of `git worktree list --porcelain`.
type gitWorktree struct{ path, branch string }

func listGitWorktrees(ctx context.Context, dir string) ([]gitWorktree, error) {
	out, err := git.Run(ctx, dir, 0, nil, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var list []gitWorktree
	for _, f := range strings.Split(string(out), "\x00") {
		switch {
		case strings.HasPrefix(f, "worktree "):
			list = append(list, gitWorktree{path: strings.TrimPrefix(f, "worktree ")})
		case strings.HasPrefix(f, "branch ") && len(list) > 0:
			list[len(list)-1].branch = strings.TrimPrefix(strings.TrimPrefix(f, "branch "), "refs/heads/")
		}
	}
	return list, nil
}

// mainCheckout is the main work tree of the repository dir is in (for a
// linked worktree, the checkout it was made from).
func mainCheckout(ctx context.Context, dir string) (string, error) {
	list, err := listGitWorktrees(ctx, dir)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", errors.New("git lists no work tree")
	}
	return list[0].path, nil
}

// worktreeOn returns the work tree of top's repository on branch, if any.
func worktreeOn(ctx context.Context, top, branch string) (string, bool) {
	list, err := listGitWorktrees(ctx, top)
	if err != nil {
		return "", false
	}
	for _, w := range list {
		if w.branch == branch {
			return w.path, true
		}
	}
	return "", false
}

func invalidf(format string, args ...any) error { return errs.Invalid(format, args...) }
