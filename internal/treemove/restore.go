package treemove

import (
	"context"
	"strings"

	"github.com/cast-dev/cast/internal/git"
)

// restoreRefs gives the checkout what travels beside the work tree: the
// remote-tracking refs, the branch's upstream and the stash entries. What
// the destination has of its own wins: a tracking ref only moves forward,
// an upstream already set stays, and stash entries it already holds are
// not added twice.
func (r repo) restoreRefs(ctx context.Context, m Manifest) error {
	if err := r.restoreTracking(ctx, m); err != nil {
		return err
	}
	if err := r.restoreUpstream(ctx, m); err != nil {
		return err
	}
	return r.restoreStashes(ctx, m.Stashes)
}

// restoreTracking creates or fast-forwards the remote-tracking refs of
// the remotes that point where the source's did (a remote the
// destination had under the same name with another URL is another
// remote: its refs are left alone).
func (r repo) restoreTracking(ctx context.Context, m Manifest) error {
	same := map[string]bool{}
	for _, rm := range m.Remotes {
		u, err := r.git(ctx, "remote", "get-url", "--", rm.Name)
		same[rm.Name] = err == nil && u == rm.URL
	}
	var tx strings.Builder
	for _, t := range m.Tracking {
		if !same[remoteOf(t.Ref, m.Remotes)] {
			continue
		}
		cur, err := r.git(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", t.Ref)
		switch {
		case err != nil && !git.IsKind(err, git.KindGit):
			return err
		case err != nil:
			tx.WriteString("create " + t.Ref + " " + t.Commit + "\n")
		case cur != t.Commit:
			if ok, err := r.isAncestor(ctx, cur, t.Commit); err != nil {
				return err
			} else if ok {
				tx.WriteString("update " + t.Ref + " " + t.Commit + " " + cur + "\n")
			}
		}
	}
	if tx.Len() == 0 {
		return nil
	}
	_, err := r.input(ctx, tx.String(), castIdentity, "update-ref", "-m", "cast: moved with the session", "--stdin")
	return err
}

// restoreUpstream sets the branch's upstream unless it has one.
func (r repo) restoreUpstream(ctx context.Context, m Manifest) error {
	if m.Upstream == nil || m.Branch == "" {
		return nil
	}
	key := "branch." + m.Branch + "."
	have, err := r.git(ctx, "config", "--default", "", "--get", key+"remote")
	if err != nil || have != "" {
		return err
	}
	if _, err := r.git(ctx, "config", key+"remote", m.Upstream.Remote); err != nil {
		return err
	}
	_, err = r.git(ctx, "config", key+"merge", m.Upstream.Merge)
	return err
}

// restoreStashes stores the entries the checkout lacks, oldest first, so
// `git stash list` shows them in the source's order above its own.
func (r repo) restoreStashes(ctx context.Context, stashes []Stash) error {
	if len(stashes) == 0 {
		return nil
	}
	have := map[string]bool{}
	if ok, err := r.exists(ctx, "refs/stash"); err != nil {
		return err
	} else if ok {
		out, err := r.git(ctx, "log", "-g", "--format=%H", "refs/stash", "--")
		if err != nil {
			return err
		}
		for _, c := range strings.Split(out, "\n") {
			have[c] = true
		}
	}
	for i := len(stashes) - 1; i >= 0; i-- {
		s := stashes[i]
		if have[s.Commit] {
			continue
		}
		if _, err := r.run(ctx, quickTimeout, castIdentity, "stash", "store", "-q", "--message="+s.Message, s.Commit); err != nil {
			return err
		}
	}
	return nil
}

// isAncestor reports whether a is an ancestor of b.
func (r repo) isAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := r.git(ctx, "merge-base", "--is-ancestor", a, b)
	if err == nil {
		return true, nil
	}
	if git.IsKind(err, git.KindGit) {
		return false, nil
	}
	return false, err
}
