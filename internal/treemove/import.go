package treemove

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/git"
)

// Import makes dir match m from the bundle at bundlePath. A missing or
// empty dir becomes a new repository holding the bundle's objects (the
// bundle is a temporary file, never a remote). An existing dir must be the
// top of a git work tree with no changes of its own. Then Branch is
// checked out at Commit (detached when Branch is ""), the source's remotes
// the checkout lacks are added with their remote-tracking refs, the
// upstream and the stash entries (restoreRefs), and the snapshot, if any,
// is laid over it: what was staged on the source is staged, the rest of
// its differences from Commit appear as unstaged or untracked changes,
// deletions included.
// When Import fails, a directory it created is removed again; an existing
// repository may be left checked out at Commit without the snapshot's
// changes. Import returns once the tree is synced (git does not sync work
// tree files): a caller's record that it is done, written after, must not
// survive a power loss that part of the tree does not.
func Import(ctx context.Context, bundlePath, dir string, m Manifest) error {
	if err := validate(ctx, bundlePath, dir, m); err != nil {
		return err
	}
	if alreadyThere(ctx, dir, m) {
		// Maybe an import that a crash cut off before its sync.
		if err := (repo{dir: dir}).addRemotes(ctx, m.Remotes); err != nil {
			return err
		}
		return durable(dir)
	}
	r, cleanup, err := destination(ctx, dir)
	if err != nil {
		return err
	}
	if err := r.apply(ctx, bundlePath, m); err != nil {
		cleanup()
		return err
	}
	return durable(dir)
}

// durable syncs the imported tree, .git included.
func durable(dir string) error {
	if err := syncTree(dir); err != nil {
		return fmt.Errorf("sync the imported tree %s to disk: %w", dir, err)
	}
	return nil
}

// validate checks the arguments before anything is written. The manifest
// comes over the network, so every field that reaches git is checked.
func validate(ctx context.Context, bundlePath, dir string, m Manifest) error {
	if !filepath.IsAbs(dir) {
		return &git.Error{Scope: scope, Kind: git.KindInvalid, Path: dir, Msg: "the destination must be an absolute path"}
	}
	if !filepath.IsAbs(bundlePath) {
		return &git.Error{Scope: scope, Kind: git.KindInvalid, Path: bundlePath, Msg: "the bundle must be given as an absolute path"}
	}
	if fi, err := os.Stat(bundlePath); err != nil || !fi.Mode().IsRegular() {
		return &git.Error{Scope: scope, Kind: git.KindBundle, Path: bundlePath, Msg: "the bundle file is missing or not a regular file", Err: err}
	}
	bad := func(msg string) error {
		return &git.Error{Scope: scope, Kind: git.KindInvalid, Path: dir, Msg: "bad manifest: " + msg}
	}
	if !objectID.MatchString(m.Commit) {
		return bad("commit " + quote(m.Commit) + " is not a full commit id")
	}
	if m.Snapshot != "" && !objectID.MatchString(m.Snapshot) {
		return bad("snapshot " + quote(m.Snapshot) + " is not a full commit id")
	}
	if m.Index != "" && (m.Snapshot == "" || !objectID.MatchString(m.Index)) {
		return bad("index " + quote(m.Index) + " is not a full commit id beside a snapshot")
	}
	// Any git directory will do for check-ref-format; the bundle's is one
	// that exists.
	r := repo{dir: filepath.Dir(bundlePath)}
	if !strings.HasPrefix(m.Ref, refPrefix) {
		return bad("ref " + quote(m.Ref) + " is not under " + refPrefix)
	}
	if _, err := r.git(ctx, "check-ref-format", m.Ref); err != nil {
		return bad("ref " + quote(m.Ref) + " is not a valid ref name")
	}
	for _, rm := range m.Remotes {
		if why := validRemote(ctx, r, rm); why != "" {
			return bad(why)
		}
	}
	if why := validRefs(m); why != "" {
		return bad(why)
	}
	if m.Branch != "" {
		// --branch also expands @{-1}; the output must be the name itself.
		out, err := r.git(ctx, "check-ref-format", "--branch", m.Branch)
		if err != nil || out != m.Branch || strings.HasPrefix(m.Branch, "-") {
			return bad("branch " + quote(m.Branch) + " is not a valid branch name")
		}
	}
	return nil
}

func quote(s string) string { return "\"" + s + "\"" }

// destination prepares dir: a new repository when dir is missing or
// empty, else the existing work tree if it is safe to move. cleanup
// undoes what destination created, for when the import fails.
func destination(ctx context.Context, dir string) (repo, func(), error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return repo{}, nil, &git.Error{Scope: scope, Kind: git.KindInvalid, Path: dir, Msg: "cannot create the directory: " + err.Error(), Err: err}
		}
		return initRepo(ctx, dir, func() { os.RemoveAll(dir) })
	case err != nil:
		return repo{}, nil, &git.Error{Scope: scope, Kind: git.KindInvalid, Path: dir, Msg: "cannot read the directory: " + err.Error(), Err: err}
	case len(entries) == 0:
		return initRepo(ctx, dir, func() { emptyDir(dir) })
	}
	r, err := existing(ctx, dir)
	return r, func() {}, err
}

// initRepo makes dir a new repository; init leaves HEAD unborn, which
// any checkout may replace.
func initRepo(ctx context.Context, dir string, cleanup func()) (repo, func(), error) {
	r := repo{dir: dir}
	if _, err := r.git(ctx, "init", "-q"); err != nil {
		cleanup()
		return repo{}, nil, err
	}
	return r, cleanup, nil
}

// emptyDir removes what an import put into a directory that was empty.
func emptyDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// alreadyThere reports whether dir already holds exactly the exported
// state: same branch, same commit, same snapshot (snapshots are
// deterministic). That is the case for a second session sharing a
// checkout, or an import retried after its report was lost.
func alreadyThere(ctx context.Context, dir string, m Manifest) bool {
	ws, err := git.Open(ctx, dir, heavyTimeout)
	if err != nil || ws.Root != ws.Dir {
		return false
	}
	r := repo{dir: ws.Root}
	head, err := r.git(ctx, "rev-parse", "--verify", "HEAD")
	if err != nil || head != m.Commit {
		return false
	}
	if b, err := r.branch(ctx); err != nil || b != m.Branch {
		return false
	}
	index, snap, err := r.uncommitted(ctx, head)
	return err == nil && snap == m.Snapshot && index == m.Index
}

// existing accepts dir only as the top of a work tree without changes,
// since checking out another commit there would mix or lose local work.
func existing(ctx context.Context, dir string) (repo, error) {
	ws, err := git.Open(ctx, dir, heavyTimeout)
	if err != nil {
		if git.IsKind(wrap(err, dir), git.KindNotRepo) {
			return repo{}, &git.Error{Scope: scope, Kind: git.KindNotEmpty, Path: dir, Msg: "exists, is not empty and is not a git work tree; import into a new or empty directory, or remove this one", Err: err}
		}
		return repo{}, wrap(err, dir)
	}
	if ws.Root != ws.Dir {
		return repo{}, &git.Error{Scope: scope, Kind: git.KindNotEmpty, Path: dir, Msg: "is inside the git work tree " + ws.Root + " but not its top; import into a new or empty directory, or into the top of a work tree"}
	}
	r := repo{dir: ws.Root}
	if err := r.notInProgress(ctx); err != nil {
		return repo{}, err
	}
	files, _, err := ws.Status(ctx, 1)
	if err != nil {
		return repo{}, wrap(err, dir)
	}
	if len(files) > 0 {
		return repo{}, &git.Error{Scope: scope, Kind: git.KindDirty, Path: dir, Msg: "has uncommitted or untracked changes (first: " + files[0].Path + "); commit, stash or remove them (see `git status`), or import into a new directory"}
	}
	return r, nil
}

// apply fetches the bundle, checks the manifest against it, checks out
// Branch at Commit, restores the refs beside it and lays the snapshot
// over it.
func (r repo) apply(ctx context.Context, bundlePath string, m Manifest) error {
	// Every ref of the bundle lands under one temporary name: the manifest
	// names commits, and only commits it names are used.
	ns := tempRef("import")
	defer r.dropRefs(ctx, ns)
	if _, err := r.run(ctx, heavyTimeout, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head",
		"--no-auto-gc", "--no-recurse-submodules", bundlePath, "+refs/*:"+ns+"/*"); err != nil {
		return &git.Error{Scope: scope, Kind: git.KindBundle, Path: bundlePath, Msg: "cannot fetch " + m.Ref + " from the bundle; it is damaged or belongs to another export: " + err.Error(), Err: err}
	}
	if err := r.matches(ctx, ns+"/"+strings.TrimPrefix(m.Ref, "refs/"), m); err != nil {
		return err
	}
	if err := r.checkout(ctx, m.Branch, m.Commit); err != nil {
		return err
	}
	if err := r.addRemotes(ctx, m.Remotes); err != nil {
		return err
	}
	if err := r.restoreRefs(ctx, m); err != nil {
		return err
	}
	if m.Snapshot == "" {
		return nil
	}
	// read-tree -u --reset makes index and files the snapshot's, deleting
	// files it lacks; the index is then set to what was staged (HEAD's
	// tree when nothing was), so the rest shows as unstaged or untracked.
	if _, err := r.run(ctx, heavyTimeout, nil, "read-tree", "-u", "--reset", m.Snapshot); err != nil {
		return err
	}
	if m.Index == "" {
		_, err := r.run(ctx, heavyTimeout, nil, "reset", "-q")
		return err
	}
	_, err := r.run(ctx, heavyTimeout, nil, "read-tree", m.Index)
	return err
}

// matches checks that the fetched ref is what the manifest says: the
// snapshot, a child of Commit (and of Index as its second parent), or
// Commit itself when there is none; and that the bundle held every stash
// entry and tracking ref the manifest names.
func (r repo) matches(ctx context.Context, ref string, m Manifest) error {
	want, parent := m.Commit, ""
	if m.Snapshot != "" {
		want, parent = m.Snapshot, m.Commit
	}
	got, err := r.git(ctx, "rev-parse", "--verify", ref+"^{commit}")
	if err == nil && parent != "" {
		var p string
		p, err = r.git(ctx, "rev-parse", "--verify", want+"^1")
		if err == nil && p != parent {
			got = ""
		}
	}
	if err == nil && m.Index != "" {
		var p string
		if p, err = r.git(ctx, "rev-parse", "--verify", want+"^2"); err == nil && p != m.Index {
			got = ""
		}
	}
	if err != nil || got != want {
		return &git.Error{Scope: scope, Kind: git.KindBundle, Path: r.dir, Msg: "the bundle does not hold the commits the manifest names; export again and send the bundle with its own manifest"}
	}
	return r.holds(ctx, m)
}

// holds checks that the commits of the stash entries and tracking refs
// arrived, in one git call.
func (r repo) holds(ctx context.Context, m Manifest) error {
	var want []string
	for _, s := range m.Stashes {
		want = append(want, s.Commit)
	}
	for _, t := range m.Tracking {
		want = append(want, t.Commit)
	}
	if len(want) == 0 {
		return nil
	}
	out, err := r.input(ctx, strings.Join(want, "\n")+"\n", nil, "cat-file", "--batch-check=%(objecttype)")
	if err != nil {
		return err
	}
	for i, typ := range strings.Split(out, "\n") {
		if typ != "commit" {
			return &git.Error{Scope: scope, Kind: git.KindBundle, Path: r.dir, Msg: "the bundle lacks commit " + want[min(i, len(want)-1)] + " that the manifest names; export again and send the bundle with its own manifest"}
		}
	}
	return nil
}

// checkout moves HEAD to commit on branch. An existing branch is only
// moved forward: resetting one with commits the source lacks would lose
// them.
func (r repo) checkout(ctx context.Context, branch, commit string) error {
	if branch == "" {
		_, err := r.run(ctx, heavyTimeout, nil, "checkout", "-q", "--detach", commit, "--")
		return err
	}
	local := "refs/heads/" + branch
	ok, err := r.exists(ctx, local)
	if err != nil {
		return err
	}
	if ok {
		if err := r.ancestor(ctx, local, commit, branch); err != nil {
			return err
		}
	}
	_, err = r.run(ctx, heavyTimeout, nil, "checkout", "-q", "--no-track", "-B", branch, commit, "--")
	return err
}

// ancestor refuses when the local branch is not an ancestor of commit.
func (r repo) ancestor(ctx context.Context, local, commit, branch string) error {
	_, err := r.git(ctx, "merge-base", "--is-ancestor", local, commit)
	var exit *exec.ExitError
	if err != nil && errors.As(err, &exit) && exit.ExitCode() == 1 {
		return &git.Error{Scope: scope, Kind: git.KindDiverged, Path: r.dir, Msg: "local branch " + branch + " has commits the moved session's branch does not; push or rename it (`git branch -m " + branch + " OTHER`), or import into a new directory"}
	}
	return err
}

// syncTree makes the imported tree durable; a test sees when it runs.
var syncTree = fsutil.SyncTree
