package treemove

import (
	"context"

	"github.com/cast-dev/cast/internal/git"
	"github.com/cast-dev/cast/internal/retry"
)

// Clean leaves the source's work tree clean once its state has moved with
// a session (m is what Export recorded): the changes go into a stash entry
// named msg (`git stash list` shows it), so nothing is lost and nothing is
// left that looks like work still to do here. It stashes only while dir
// holds exactly the exported state, the same HEAD, branch, index and work
// tree: anything done there since is left as it is, with an error of kind
// git.KindDirty that says so. It reports whether it stashed; m without
// changes needs nothing.
func Clean(ctx context.Context, dir string, m Manifest, msg string) (bool, error) {
	if why := validStash(Stash{Commit: m.Commit, Message: msg}); why != "" || msg == "" {
		return false, &git.Error{Scope: scope, Kind: git.KindInvalid, Path: dir, Msg: "bad clean request: " + why}
	}
	if m.Snapshot == "" {
		return false, nil
	}
	r, err := check(ctx, dir)
	if err != nil {
		return false, err
	}
	// A git command elsewhere (an editor's status) may hold the index lock
	// for a moment; stash push then fails before it changes anything, and
	// the state check before each try makes trying again safe.
	err = retry.Do(ctx, retry.GitIndexLock, func() error {
		if err := r.unchangedSince(ctx, m); err != nil {
			return retry.Stop(err)
		}
		_, err := r.run(ctx, heavyTimeout, castIdentity, "stash", "push", "--include-untracked", "--message="+msg)
		if err != nil && !git.IsKind(err, git.KindGit) {
			return retry.Stop(err)
		}
		return err
	}, nil)
	return err == nil, err
}

// unchangedSince says whether the work tree still holds the state m
// recorded (git.KindDirty when not).
func (r repo) unchangedSince(ctx context.Context, m Manifest) error {
	head, err := r.git(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return err
	}
	branch, err := r.branch(ctx)
	if err != nil {
		return err
	}
	index, snap, err := r.uncommitted(ctx, head)
	if err != nil {
		return err
	}
	if head != m.Commit || branch != m.Branch || index != m.Index || snap != m.Snapshot {
		return &git.Error{Scope: scope, Kind: git.KindDirty, Path: r.dir, Msg: "changed after its state was moved; it keeps its changes (compare with the destination before you use them)"}
	}
	return nil
}
