package treemove

import (
	"errors"
	"testing"

	"github.com/cast-dev/cast/internal/workspace"
)

// wrap keeps the messages a move has always given: "worktree PATH: ...",
// a missing folder read as no work tree, and an error wrapped once only.
func TestWrap(t *testing.T) {
	t.Parallel()
	plain := errors.New("boom")
	ours := wrap(plain, "/w")
	for _, tc := range []struct {
		name string
		in   error
		kind workspace.ErrorKind
		msg  string
	}{
		{"a plain error is git's", plain, workspace.KindGit, "worktree /w: boom"},
		{"a missing folder is no work tree", &workspace.Error{Kind: workspace.KindNotFound, Path: "/x", Msg: "does not exist on this machine"},
			workspace.KindNotRepo, "worktree /w: does not exist on this machine"},
		{"no git says to install it", &workspace.Error{Kind: workspace.KindNoGit, Msg: "git is not installed"},
			workspace.KindNoGit, "worktree /w: git is not installed; install git on this machine"},
		{"ours is kept as it is", ours, workspace.KindGit, "worktree /w: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wrap(tc.in, "/w")
			if !workspace.IsKind(err, tc.kind) || err.Error() != tc.msg {
				t.Fatalf("wrap = %v (kind %v), want %q of kind %v", err, err.(*workspace.Error).Kind, tc.msg, tc.kind)
			}
		})
	}
	if err := wrap(ours, "/w"); err != ours {
		t.Fatalf("wrap of its own error made a new one: %v", err)
	}
	if got := (&workspace.Error{Kind: workspace.KindGit, Path: "/r", Msg: "m"}).Error(); got != "workspace /r: m" {
		t.Fatalf("workspace's own error reads %q", got)
	}
}
