package treemove

import (
	"errors"

	"github.com/cast-dev/cast/internal/workspace"
)

// scope is the first word of this package's error messages. Its errors
// are the git runner's *workspace.Error, so one type and one kind
// (workspace.ErrorKind) name every git error cast reports; Msg tells a
// person what is wrong and what to do about it. Match them with
// workspace.IsKind.
const scope = "worktree"

// wrap turns an error from workspace into this package's, about path.
func wrap(err error, path string) error {
	var we *workspace.Error
	switch {
	case !errors.As(err, &we):
		return &workspace.Error{Kind: workspace.KindGit, Scope: scope, Path: path, Msg: err.Error(), Err: err}
	case we.Scope == scope:
		return err // ours already
	}
	k := we.Kind
	if k == workspace.KindNotFound || k == workspace.KindNotDir {
		k = workspace.KindNotRepo // to a move, a missing folder is no work tree
	}
	msg := we.Msg
	if k == workspace.KindNoGit {
		msg += "; install git on this machine"
	}
	return &workspace.Error{Kind: k, Scope: scope, Path: path, Msg: msg, Err: err}
}
