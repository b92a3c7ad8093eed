package worktree

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cast-dev/cast/internal/workspace"
)

// ErrorKind says why a work tree cannot be exported or imported.
type ErrorKind int

const (
	KindInvalid    ErrorKind = iota + 1 // bad argument: relative path, bad manifest, bad path map
	KindNotRepo                         // not a git work tree, or not its top-level directory
	KindNoCommits                       // the repository has no commit yet
	KindInProgress                      // a merge, rebase, cherry-pick or revert is under way
	KindShallow                         // a shallow clone cannot be bundled whole
	KindDirty                           // the destination has changes of its own
	KindDiverged                        // the destination branch has commits the source lacks
	KindNotEmpty                        // the destination exists but is neither empty nor a repository
	KindBundle                          // the bundle is missing or does not hold what the manifest says
	KindUntrusted                       // git refuses the repository (safe.directory)
	KindNoGit                           // no git binary on PATH
	KindTimeout                         // git did not answer in time
	KindGit                             // git failed otherwise
)

var kindNames = map[ErrorKind]string{
	KindInvalid: "invalid", KindNotRepo: "not_repo", KindNoCommits: "no_commits",
	KindInProgress: "in_progress", KindShallow: "shallow", KindDirty: "dirty",
	KindDiverged: "diverged", KindNotEmpty: "not_empty", KindBundle: "bundle",
	KindUntrusted: "untrusted", KindNoGit: "no_git", KindTimeout: "timeout", KindGit: "git",
}

func (k ErrorKind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is every error this package returns; match it with errors.As or
// IsKind. Msg tells a person what is wrong and what to do about it.
type Error struct {
	Kind ErrorKind
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
func IsKind(err error, k ErrorKind) bool {
	var we *Error
	return errors.As(err, &we) && we.Kind == k
}

// fromWorkspace maps kinds shared with workspace, whose runner and Open
// this package uses, so callers need to know only this package's errors.
var fromWorkspace = map[workspace.ErrorKind]ErrorKind{
	workspace.KindInvalidPath: KindInvalid, workspace.KindNotFound: KindNotRepo,
	workspace.KindNotDir: KindNotRepo, workspace.KindNotRepo: KindNotRepo,
	workspace.KindUntrusted: KindUntrusted, workspace.KindNoGit: KindNoGit,
	workspace.KindTimeout: KindTimeout, workspace.KindGit: KindGit,
}

// wrap turns an error from workspace into an *Error about path.
func wrap(err error, path string) error {
	var we *workspace.Error
	if !errors.As(err, &we) {
		var own *Error
		if errors.As(err, &own) {
			return err
		}
		return &Error{Kind: KindGit, Path: path, Msg: err.Error(), Err: err}
	}
	k, ok := fromWorkspace[we.Kind]
	if !ok {
		k = KindGit
	}
	msg := we.Msg
	if k == KindNoGit {
		msg += "; install git on this machine"
	}
	return &Error{Kind: k, Path: path, Msg: msg, Err: err}
}
