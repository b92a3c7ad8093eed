package ids

import (
	"strings"
	"testing"
)

func TestValidBranch(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"feature/x", true}, {"fix-1.2", true}, {"cast/fork-s9xn02s", true}, {"a_b", true},
		{"", false}, {"-x", false}, {"--upload-pack=x", false}, {"/abs", false}, {"a/", false}, {"a.", false},
		{"a.lock", false}, {"a..b", false}, {"a//b", false}, {"a@{1}", false}, {"@", false}, {"a/.b", false},
		{".hidden", false}, {"a b", false}, {"a~1", false}, {"a^", false}, {"a:b", false}, {"a?", false},
		{"a*", false}, {"a[b", false}, {`a\b`, false}, {"a\x00b", false}, {"a\tb", false},
		// git check-ref-format --branch: no component ends in .lock, and HEAD names no branch.
		{"x.lock/y", false}, {"a/b.lock/c", false}, {"HEAD", false}, {"a/HEAD", true}, {"a/-x", true}, {"lock/x.locks", true},
	} {
		if got := ValidBranch(tc.name); got != tc.ok {
			t.Errorf("ValidBranch(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestDefaultBranch(t *testing.T) {
	for _, tc := range []struct{ title, id, want string }{
		{"Fix the parser!", "jx731jg", "cast/fix-the-parser--x731jg"},
		{"", "jx731jg", "cast/thread--x731jg"},
		{"--upload-pack=x a..b HEAD~1", "jx731jg", "cast/upload-pack-x-a-b-head-1--x731jg"},
		{"naïve ✓ ünïcode", "abcdefgh", "cast/na-ve-n-code--cdefgh"},
		{strings.Repeat("word ", 30), "jx731jg", "cast/word-word-word-word-word-word-word-word-w--x731jg"},
	} {
		got := DefaultBranch(tc.title, tc.id)
		if got != tc.want || !ValidBranch(got) {
			t.Errorf("DefaultBranch(%q) = %q (valid %v), want %q", tc.title, got, ValidBranch(got), tc.want)
		}
	}
}
