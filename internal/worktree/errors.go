package worktree

import (
	"errors"
	"fmt"

	"github.com/cast-dev/cast/internal/workspace"
)

// Error is every error this package returns; match it with errors.As or
// IsKind. Its kinds are the git runner's (workspace.ErrorKind), so one
// enum names every git error cast reports. Msg tells a person what is
// wrong and what to do about it.
type Error struct {
	Kind workspace.ErrorKind
	Path string // the work tree, bundle or path-map entry concerned
	Msg  string
	Err  error // underlying cause, if any
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "worktree: " + e.Msg
	}
	return fmt.Sprintf("worktree %s: %s", e.Path, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is a worktree *Error of kind k.
func IsKind(err error, k workspace.ErrorKind) bool {
	var we *Error
	return errors.As(err, &we) && we.Kind == k
}

// wrap turns an error from workspace into an *Error about path.
func wrap(err error, path string) error {
	var we *workspace.Error
	if !errors.As(err, &we) {
		var own *Error
		if errors.As(err, &own) {
			return err
		}
		return &Error{Kind: workspace.KindGit, Path: path, Msg: err.Error(), Err: err}
	}
	k := we.Kind
	if k == workspace.KindNotFound || k == workspace.KindNotDir {
		k = workspace.KindNotRepo // to a move, a missing folder is no work tree
	}
	msg := we.Msg
	if k == workspace.KindNoGit {
		msg += "; install git on this machine"
	}
	return &Error{Kind: k, Path: path, Msg: msg, Err: err}
}
