package ids

import "testing"

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
	} {
		if got := ValidBranch(tc.name); got != tc.ok {
			t.Errorf("ValidBranch(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
