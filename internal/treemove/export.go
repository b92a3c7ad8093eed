// Package treemove moves a git work tree between machines, for cast's
// session migration: the destination ends up on the same commit and
// branch with the same staged, unstaged and untracked changes, the same
// stashes and remote-tracking refs.
//
// Why a bundle plus a snapshot commit: the control plane relays one file,
// and a git bundle is git's own single-file transport, carrying history
// the destination may lack and checked on the way in. Uncommitted work is
// not in any commit, so Export records it as commits on top of HEAD, the
// way `git stash` does: one of the index (what is staged) and one of the
// whole work tree (HEAD, staged, unstaged and untracked-but-not-ignored
// files, deletions), both built through a copy of the index so the
// source's index, refs, stash and files are never touched. Import checks
// out HEAD's commit, lays the snapshot's tree over it and sets the index
// to the staged tree, so what was staged is staged again and the rest
// shows as unstaged or untracked changes. Stash entries and
// remote-tracking refs travel as further refs of the bundle; the branch's
// upstream and the remotes (names and URLs) in the manifest.
//
// Limitations: ignored files, other local branches, hooks and repository
// config (beyond remotes and the upstream) do not travel; entries added
// with `git add -N` arrive untracked; submodules and nested repositories
// travel only as the commit their gitlink records; the whole history of
// HEAD is bundled every time. Git 2.31 or newer is needed on both
// machines.
package treemove

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cast-dev/cast/internal/git"
)

// Manifest describes an exported work tree; it travels beside the bundle.
type Manifest struct {
	Commit   string `json:"commit"`   // HEAD commit id
	Branch   string `json:"branch"`   // short branch name, "" when HEAD is detached
	Snapshot string `json:"snapshot"` // commit of the whole work tree, "" when clean
	Ref      string `json:"ref"`      // ref in the bundle holding Snapshot (or Commit when clean)
	// Index is the commit of the staged tree, the snapshot's second parent
	// ("" when nothing is staged: the index is HEAD's tree).
	Index string `json:"index,omitempty"`
	// Remotes are the checkout's remotes, so the destination fetches and
	// pushes where the source did (only plain URLs travel: see safeURL).
	Remotes []Remote `json:"remotes,omitempty"`
	// Upstream is the branch's upstream (nil: none, or detached).
	Upstream *Upstream `json:"upstream,omitempty"`
	// Tracking are the remote-tracking refs of Remotes (origin/main...).
	Tracking []Tracking `json:"tracking,omitempty"`
	// Stashes are the stash entries, newest first as `git stash list`.
	Stashes []Stash `json:"stashes,omitempty"`
	// Subdir is where the exported directory is below the top of the work
	// tree ("pkg/api", slash-separated; "" at the top): the whole work
	// tree travels, and the destination lays it down at the directory
	// that holds its own path for that one (Top).
	Subdir string `json:"subdir,omitempty"`
}

// Top is the top of the checkout on this machine whose Subdir is dir (the
// destination's path for the exported directory).
func (m Manifest) Top(dir string) (string, error) {
	if m.Subdir == "" {
		return dir, nil
	}
	sub := filepath.FromSlash(m.Subdir)
	top, rest := dir, ""
	for range strings.Count(sub, string(filepath.Separator)) + 1 {
		rest = filepath.Join(filepath.Base(top), rest)
		top = filepath.Dir(top)
	}
	if !filepath.IsLocal(sub) || filepath.Clean(sub) != sub || rest != sub {
		return "", &git.Error{Scope: scope, Kind: git.KindInvalid, Path: dir, Msg: "bad manifest: subdirectory " + quote(m.Subdir) + " is not the end of this path"}
	}
	return top, nil
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
	ws, err := git.Open(ctx, dir, quickTimeout)
	if err != nil {
		err = wrap(err, dir)
		var e *git.Error
		if errors.As(err, &e) && e.Kind == git.KindNotRepo {
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
		return repo{}, &git.Error{Scope: scope, Kind: git.KindShallow, Path: r.dir, Msg: "is a shallow clone, whose history cannot be bundled whole; run `git fetch --unshallow` first"}
	}
	if ok, err := r.exists(ctx, "HEAD^{commit}"); err != nil {
		return repo{}, err
	} else if !ok {
		return repo{}, &git.Error{Scope: scope, Kind: git.KindNoCommits, Path: r.dir, Msg: "has no commits yet; make a first commit before moving the session"}
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
			return &git.Error{Scope: scope, Kind: git.KindInProgress, Path: r.dir, Msg: "is in the middle of " + p.what + "; finish it or abort it (git status says how), then try again"}
		}
	}
	unmerged, err := r.git(ctx, "ls-files", "--unmerged")
	if err != nil {
		return err
	}
	if unmerged != "" {
		return &git.Error{Scope: scope, Kind: git.KindInProgress, Path: r.dir, Msg: "has unresolved conflicts; resolve them and `git add` the files, then try again"}
	}
	return nil
}

// Export writes a bundle of dir's work tree to bundlePath: HEAD's history
// plus, when there are changes, snapshot commits of the index and the work
// tree, and the stash entries and remote-tracking refs. dir's HEAD, index,
// refs, stash and files stay as they were; only objects are added to its
// object store.
func Export(ctx context.Context, dir, bundlePath string) (Manifest, error) {
	bundle, err := filepath.Abs(bundlePath)
	if err != nil || bundlePath == "" {
		return Manifest{}, &git.Error{Scope: scope, Kind: git.KindInvalid, Path: bundlePath, Msg: "is not a usable bundle path"}
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
	prefix, err := repo{dir: dir}.git(ctx, "rev-parse", "--show-prefix")
	if err != nil {
		return Manifest{}, err
	}
	m.Subdir = strings.TrimSuffix(prefix, "/")
	if m.Index, m.Snapshot, err = r.uncommitted(ctx, m.Commit); err != nil {
		return Manifest{}, err
	}
	if err := r.describeRefs(ctx, &m); err != nil {
		return Manifest{}, err
	}
	// git bundle takes refs, not bare commits, so refs are made just for
	// it, pinned at what the manifest names (a fetch running meanwhile
	// cannot make the two disagree); create fails rather than reuse one.
	m.Ref = tempRef("export")
	refs := exportRefs(m)
	var tx strings.Builder
	for _, ref := range refs {
		tx.WriteString("create " + ref.name + " " + ref.commit + "\n")
	}
	defer r.dropRefs(ctx, m.Ref)
	if _, err := r.input(ctx, tx.String(), nil, "update-ref", "--stdin"); err != nil {
		return Manifest{}, err
	}
	args := []string{"bundle", "create", "-q", bundle}
	for _, ref := range refs {
		args = append(args, ref.name)
	}
	if _, err := r.run(ctx, heavyTimeout, nil, args...); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// describeRefs fills in what travels beside the work tree: the remotes,
// the branch's upstream, the remote-tracking refs and the stash.
func (r repo) describeRefs(ctx context.Context, m *Manifest) error {
	var err error
	if m.Remotes, err = r.remotes(ctx); err != nil {
		return err
	}
	if m.Upstream, err = r.upstream(ctx, m.Branch, m.Remotes); err != nil {
		return err
	}
	if m.Tracking, err = r.tracking(ctx, m.Remotes, m.Upstream); err != nil {
		return err
	}
	m.Stashes, err = r.stashes(ctx)
	return err
}

type pinnedRef struct{ name, commit string }

// exportRefs are the bundle's refs, all under m.Ref's name: m.Ref holds
// the snapshot (or Commit when clean), the others one stash entry or
// remote-tracking ref each.
func exportRefs(m Manifest) []pinnedRef {
	head := m.Commit
	if m.Snapshot != "" {
		head = m.Snapshot
	}
	refs := []pinnedRef{{m.Ref, head}}
	for i, s := range m.Stashes {
		refs = append(refs, pinnedRef{m.Ref + "-s" + strconv.Itoa(i), s.Commit})
	}
	for i, t := range m.Tracking {
		refs = append(refs, pinnedRef{m.Ref + "-t" + strconv.Itoa(i), t.Commit})
	}
	return refs
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

// uncommitted records what no commit holds, on top of head: index is a
// commit of the staged tree ("" when it is head's tree), snapshot a commit
// of the whole work tree whose parents are head and index, as git stash
// makes them ("" when neither differs from head). Both come from a copy of
// the index, so the user's index file stays byte for byte as it was (even
// write-tree would rewrite its cache), tracked files that match .gitignore
// are kept and only files changed since the index was written are hashed.
func (r repo) uncommitted(ctx context.Context, head string) (index, snapshot string, err error) {
	tmp, err := os.MkdirTemp("", "cast-worktree-")
	if err != nil {
		return "", "", &git.Error{Scope: scope, Kind: git.KindGit, Path: r.dir, Msg: "cannot make a temporary index: " + err.Error(), Err: err}
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if err := r.copyIndex(ctx, filepath.Join(tmp, "index"), head, env); err != nil {
		return "", "", err
	}
	headTree, err := r.git(ctx, "rev-parse", "--verify", head+"^{tree}")
	if err != nil {
		return "", "", err
	}
	staged, err := r.run(ctx, heavyTimeout, env, "write-tree")
	if err != nil {
		return "", "", err
	}
	if staged != headTree {
		if index, err = r.commitTree(ctx, staged, "cast: staged changes", head); err != nil {
			return "", "", err
		}
	}
	if _, err := r.run(ctx, heavyTimeout, env, "add", "-A"); err != nil {
		return "", "", err
	}
	tree, err := r.run(ctx, heavyTimeout, env, "write-tree")
	if err != nil || (tree == headTree && index == "") {
		return index, "", err
	}
	snapshot, err = r.commitTree(ctx, tree, "cast: work tree snapshot", head, index)
	return index, snapshot, err
}

// copyIndex copies the repository's index to path with its modification
// time, which git compares file times with: a file written in the same
// second as the index ("racily clean") is then still hashed again, not
// taken as unchanged. A repository without an index gets head's tree.
func (r repo) copyIndex(ctx context.Context, path, head string, env []string) error {
	src, err := r.git(ctx, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if errors.Is(err, os.ErrNotExist) {
		_, err = r.run(ctx, heavyTimeout, env, "read-tree", head)
		return err
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(src)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err == nil {
		err = os.Chtimes(path, fi.ModTime(), fi.ModTime())
	}
	if err != nil {
		return &git.Error{Scope: scope, Kind: git.KindGit, Path: r.dir, Msg: "cannot copy the index: " + err.Error(), Err: err}
	}
	return nil
}

// commitTree makes a commit of tree with the given parents ("" skipped),
// dated and signed so the same state always makes the same commit.
func (r repo) commitTree(ctx context.Context, tree, msg string, parents ...string) (string, error) {
	args := []string{"commit-tree", "--no-gpg-sign"}
	for _, p := range parents {
		if p != "" {
			args = append(args, "-p", p)
		}
	}
	args = append(args, "-m", msg, tree)
	return r.run(ctx, quickTimeout, snapshotIdentity, args...)
}
