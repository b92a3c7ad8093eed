// Package worktree moves a git work tree between machines, for cast's
// session migration: the destination ends up on the same commit and
// branch with the same uncommitted and untracked changes.
//
// Why a bundle plus a snapshot commit: the control plane relays one file,
// and a git bundle is git's own single-file transport, carrying history
// the destination may lack and checked on the way in. Uncommitted work is
// not in any commit, so Export records the whole work tree (HEAD, staged,
// unstaged and untracked-but-not-ignored files, deletions) as one extra
// commit whose parent is HEAD, built through a temporary index so the
// source's index, refs, stash and files are never touched. Import checks
// out HEAD's commit and then lays the snapshot's tree over it, leaving
// the differences as unstaged or untracked changes.
//
// Limitations: staged and unstaged changes arrive together as unstaged
// (the index is reset to HEAD); ignored files, other branches, the stash,
// hooks and repository config do not travel (remotes do: their names and
// URLs); submodules and nested
// repositories travel only as the commit their gitlink records; the
// whole history of HEAD is bundled every time. Git 2.31 or newer is
// needed on both machines.
package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/workspace"
)

// Manifest describes an exported work tree; it travels beside the bundle.
type Manifest struct {
	Commit   string `json:"commit"`   // HEAD commit id
	Branch   string `json:"branch"`   // short branch name, "" when HEAD is detached
	Snapshot string `json:"snapshot"` // commit of the whole work tree, "" when clean
	Ref      string `json:"ref"`      // ref in the bundle holding Snapshot (or Commit when clean)
	// Remotes are the checkout's remotes, so the destination fetches and
	// pushes where the source did (only plain URLs travel: see safeURL).
	Remotes []Remote `json:"remotes,omitempty"`
}

// Check reports whether dir is a git work tree that can be exported. A
// directory below the top of the work tree is accepted; the whole work
// tree is what travels.
func Check(ctx context.Context, dir string) error {
	_, err := check(ctx, dir)
	return err
}

// check returns the top-level directory of the work tree dir is in.
func check(ctx context.Context, dir string) (repo, error) {
	ws, err := workspace.Open(ctx, dir, quickTimeout)
	if err != nil {
		err = wrap(err, dir)
		var e *Error
		if errors.As(err, &e) && e.Kind == KindNotRepo {
			e.Msg += "; only a git work tree can move with its session: start the session in a git checkout, or `git init` and commit here"
		}
		return repo{}, err
	}
	r := repo{dir: ws.Root}
	shallow, err := r.git(ctx, "rev-parse", "--is-shallow-repository")
	if err != nil {
		return repo{}, err
	}
	if shallow == "true" {
		return repo{}, &Error{Kind: KindShallow, Path: r.dir, Msg: "is a shallow clone, whose history cannot be bundled whole; run `git fetch --unshallow` first"}
	}
	if ok, err := r.exists(ctx, "HEAD^{commit}"); err != nil {
		return repo{}, err
	} else if !ok {
		return repo{}, &Error{Kind: KindNoCommits, Path: r.dir, Msg: "has no commits yet; make a first commit before moving the session"}
	}
	return r, r.notInProgress(ctx)
}

// inProgress names the files git keeps while an operation waits for the
// user; a snapshot taken then would lose that state.
var inProgress = []struct{ file, what string }{
	{"MERGE_HEAD", "a merge"}, {"rebase-merge", "a rebase"}, {"rebase-apply", "a rebase or am"},
	{"CHERRY_PICK_HEAD", "a cherry-pick"}, {"REVERT_HEAD", "a revert"},
}

// notInProgress refuses a work tree in the middle of a merge, rebase,
// cherry-pick or revert, or with unresolved conflicts.
func (r repo) notInProgress(ctx context.Context) error {
	for _, p := range inProgress {
		path, err := r.git(ctx, "rev-parse", "--git-path", p.file)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(r.dir, path)
		}
		if _, err := os.Lstat(path); err == nil {
			return &Error{Kind: KindInProgress, Path: r.dir, Msg: "is in the middle of " + p.what + "; finish it or abort it (git status says how), then try again"}
		}
	}
	unmerged, err := r.git(ctx, "ls-files", "--unmerged")
	if err != nil {
		return err
	}
	if unmerged != "" {
		return &Error{Kind: KindInProgress, Path: r.dir, Msg: "has unresolved conflicts; resolve them and `git add` the files, then try again"}
	}
	return nil
}

// Export writes a bundle of dir's work tree to bundlePath: HEAD's history
// plus, when there are changes, a snapshot commit of the work tree. dir's
// HEAD, index, refs, stash and files stay as they were; only objects are
// added to its object store.
func Export(ctx context.Context, dir, bundlePath string) (Manifest, error) {
	bundle, err := filepath.Abs(bundlePath)
	if err != nil || bundlePath == "" {
		return Manifest{}, &Error{Kind: KindInvalid, Path: bundlePath, Msg: "is not a usable bundle path"}
	}
	r, err := check(ctx, dir)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if m.Commit, err = r.git(ctx, "rev-parse", "--verify", "HEAD^{commit}"); err != nil {
		return Manifest{}, err
	}
	if m.Branch, err = r.branch(ctx); err != nil {
		return Manifest{}, err
	}
	if m.Snapshot, err = r.snapshot(ctx, m.Commit); err != nil {
		return Manifest{}, err
	}
	if m.Remotes, err = r.remotes(ctx); err != nil {
		return Manifest{}, err
	}
	target := m.Commit
	if m.Snapshot != "" {
		target = m.Snapshot
	}
	// git bundle takes refs, not bare commits, so a ref is made just for
	// it; the empty old value makes update-ref fail rather than reuse one.
	m.Ref = tempRef("export")
	if _, err := r.git(ctx, "update-ref", m.Ref, target, ""); err != nil {
		return Manifest{}, err
	}
	defer r.dropRef(ctx, m.Ref)
	if _, err := r.run(ctx, heavyTimeout, nil, "bundle", "create", "-q", bundle, m.Ref); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// branch is HEAD's short branch name, "" when detached. --symbolic-full-name
// is used rather than --abbrev-ref, whose short names can be ambiguous.
func (r repo) branch(ctx context.Context) (string, error) {
	full, err := r.git(ctx, "rev-parse", "--symbolic-full-name", "HEAD")
	if err != nil {
		return "", err
	}
	name, ok := strings.CutPrefix(full, "refs/heads/")
	if !ok {
		return "", nil
	}
	return name, nil
}

// snapshot commits the whole work tree on top of head through a temporary
// index, and returns "" when the work tree equals head's tree. The index
// starts as head's tree so tracked files that match .gitignore are kept.
func (r repo) snapshot(ctx context.Context, head string) (string, error) {
	tmp, err := os.MkdirTemp("", "cast-worktree-")
	if err != nil {
		return "", &Error{Kind: KindGit, Path: r.dir, Msg: "cannot make a temporary index: " + err.Error(), Err: err}
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if _, err := r.run(ctx, heavyTimeout, env, "read-tree", head); err != nil {
		return "", err
	}
	if _, err := r.run(ctx, heavyTimeout, env, "add", "-A"); err != nil {
		return "", err
	}
	tree, err := r.run(ctx, heavyTimeout, env, "write-tree")
	if err != nil {
		return "", err
	}
	headTree, err := r.git(ctx, "rev-parse", "--verify", head+"^{tree}")
	if err != nil || tree == headTree {
		return "", err
	}
	env = append(env, snapshotIdentity...)
	return r.run(ctx, quickTimeout, env, "commit-tree", "--no-gpg-sign", "-p", head, "-m", "cast: work tree snapshot", tree)
}
