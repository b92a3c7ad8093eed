package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The CLI refuses what the control plane would, before it dials: the
// address is a closed port, so reaching the network would fail otherwise.
func TestCLIRefusesBadFieldsEarly(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"model read as a flag", []string{"new", "--agent", "claude", "--model=--dangerously-skip-permissions", "hi"}, "", "read as a flag"},
		{"effort read as a flag", []string{"switch", "-s", "jx731jg", "--effort=-x"}, "", "read as a flag"},
		{"fork model", []string{"fork", "jx731jg", "--model", "gpt 5"}, "", "--model"},
		{"cwd with newline", []string{"new", "--agent", "claude", "--cwd", "/tmp/a\nb", "hi"}, "", "control character"},
		{"NUL from stdin", []string{"send", "-s", "jx731jg", "-"}, "a\x00b", "NUL byte"},
		{"exec prompt with NUL", []string{"exec", "--agent", "claude", "a\x00b"}, "", "NUL byte"},
		{"exec model read as a flag", []string{"exec", "--agent", "claude", "--dry-run", "--model=-x", "hi"}, "", "read as a flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"--addr", "127.0.0.1:1", "--timeout", "2s"}, tc.args...),
				strings.NewReader(tc.stdin), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errb.String(), tc.want)
			}
		})
	}
}
