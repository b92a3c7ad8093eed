package treemove

import (
	"errors"

	"github.com/cast-dev/cast/internal/git"
)

// scope is the first word of this package's error messages. Its errors
// are the git runner's *git.Error, so one type and one kind
// (git.ErrorKind) name every git error cast reports; Msg tells a
// person what is wrong and what to do about it. Match them with
// git.IsKind.
const scope = "worktree"

// wrap turns an error from workspace into this package's, about path.
func wrap(err error, path string) error {
	var we *git.Error
	switch {
	case !errors.As(err, &we):
		return &git.Error{Kind: git.KindGit, Scope: scope, Path: path, Msg: err.Error(), Err: err}
	case we.Scope == scope:
		return err // ours already
	}
	k := we.Kind
	if k == git.KindNotFound || k == git.KindNotDir {
		k = git.KindNotRepo // to a move, a missing folder is no work tree
	}
	msg := we.Msg
	if k == git.KindNoGit {
		msg += "; install git on this machine"
	}
	return &git.Error{Kind: k, Scope: scope, Path: path, Msg: msg, Err: err}
}
