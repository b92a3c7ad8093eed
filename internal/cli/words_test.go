package cli

import (
	"slices"
	"testing"
)

// A kubectl or gh user types their own verbs (delete, logs, revoke, ...)
// and cobra's edit distance finds nothing near: each is a usage mistake
// (exit 2) that names the cast command doing it. An argument to a command
// that takes none says so rather than calling it an unknown command, and
// an unknown shell for `cast completion` is refused, not answered with
// help and exit 0. No request is made (the address answers nothing).
func TestOtherCLIsWordsPointToCast(t *testing.T) {
	const nowhere = "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"delete", "abc1234"}, []string{`unknown command "delete"`, `did you mean "rm"?`}},
		{[]string{"archive", "abc1234"}, []string{`did you mean "rm"?`}},
		{[]string{"logs", "abc1234"}, []string{`did you mean "read" or "watch"?`}},
		{[]string{"create", "--agent", "claude", "hi"}, []string{`did you mean "new"?`}},
		{[]string{"token", "revoke", "alice"}, []string{`did you mean "rm"?`}},
		{[]string{"node", "delete", "n1"}, []string{`did you mean "rm"?`}},
		{[]string{"worktree", "delete", "/x"}, []string{`did you mean "rm"?`}},
		{[]string{"account", "delete", "w", "--agent", "claude"}, []string{`did you mean "rm"?`}},
		{[]string{"config", "view"}, []string{`did you mean "get-contexts"?`}},
		{[]string{"completion", "tcsh"}, []string{`unknown command "tcsh"`, "cast completion --help"}},
		{[]string{"token", "create", "alice", "--role", "user"}, []string{"`cast token create` takes no arguments", `"alice"`, "cast token create --help"}},
		{[]string{"ls", "claude"}, []string{"`cast ls` takes no arguments", `"claude"`}},
	} {
		_, errOut, code := runMain(t, nowhere, tc.args...)
		if code != 2 || !saysAll(errOut, tc.want) {
			t.Errorf("cast %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// A flag that takes one of a fixed set completes that set, with no control
// plane needed, rather than falling back to file names.
func TestFixedValuesComplete(t *testing.T) {
	const nowhere = "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"ls", "--state", ""}, stateNames()},
		{[]string{"ls", "--origin", ""}, []string{"native", "cast"}},
		{[]string{"token", "create", "--role", ""}, []string{"admin", "user"}},
	} {
		if got := complete(t, nowhere, tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("complete %q: got %q, want %q", tc.args, got, tc.want)
		}
	}
}
