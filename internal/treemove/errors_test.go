package treemove

import (
	"errors"
	"testing"

	"github.com/cast-dev/cast/internal/git"
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
		kind git.ErrorKind
		msg  string
	}{
		{"a plain error is git's", plain, git.KindGit, "worktree /w: boom"},
		{"a missing folder is no work tree", &git.Error{Kind: git.KindNotFound, Path: "/x", Msg: "does not exist on this machine"},
			git.KindNotRepo, "worktree /w: does not exist on this machine"},
		{"no git says to install it", &git.Error{Kind: git.KindNoGit, Msg: "git is not installed"},
			git.KindNoGit, "worktree /w: git is not installed; install git on this machine"},
		{"ours is kept as it is", ours, git.KindGit, "worktree /w: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wrap(tc.in, "/w")
			if !git.IsKind(err, tc.kind) || err.Error() != tc.msg {
				t.Fatalf("wrap = %v (kind %v), want %q of kind %v", err, err.(*git.Error).Kind, tc.msg, tc.kind)
			}
		})
	}
	if err := wrap(ours, "/w"); err != ours {
		t.Fatalf("wrap of its own error made a new one: %v", err)
	}
	if got := (&git.Error{Kind: git.KindGit, Path: "/r", Msg: "m"}).Error(); got != "workspace /r: m" {
		t.Fatalf("workspace's own error reads %q", got)
	}
}
