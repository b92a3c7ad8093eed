package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// The built cast exits as docs/reference.md says: 2 for a usage mistake
// (unknown command or flag, missing or extra arguments, a malformed id),
// 1 for a refused request, 0 for a bare command group (it prints its
// help).
func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	cast := filepath.Join(testharness.Binaries(t), "cast")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"bogus"}, 2},
		{[]string{"account", "bogus"}, 2},
		{[]string{"ls", "--bogus"}, 2},
		{[]string{"get"}, 2},
		{[]string{"get", "a", "b"}, 2},
		{[]string{"ls", "extra"}, 2},
		{[]string{"send", "--model", "-x", "s1", "hi"}, 2},
		{[]string{"interrupt", "s1", "-s", "s2"}, 2},
		{[]string{"send"}, 2},
		{[]string{"get", "no-such-session"}, 2}, // not an id: refused before any request
		{[]string{"get", "nosuchsession9"}, 1},
		{[]string{"interrupt", "nosuchsession9"}, 1},
		{[]string{"account"}, 0},
		{[]string{"ls"}, 0},
	} {
		out, errOut, code := testharness.Run(t, nil, cast, append([]string{"--addr", srv.Addr()}, tc.args...)...)
		if code != tc.code {
			t.Errorf("cast %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), code, tc.code, out, errOut)
		}
		if tc.code != 0 && !strings.HasPrefix(errOut, "cast: ") {
			t.Errorf("cast %s: stderr %q, want one `cast: ...` line", strings.Join(tc.args, " "), errOut)
		}
	}
}

// The daemons' help lists each flag with at most a one-word value name
// (a bool none): back-quoted text in a usage string would show instead.
func TestDaemonFlagHelp(t *testing.T) {
	t.Parallel()
	bin := testharness.Binaries(t)
	flagLine := regexp.MustCompile(`^\s+(-\w, )?--[\w-]+( \w+)?\s{2,}\S`)
	for _, b := range []string{"controlplane", "node"} {
		out, errOut, code := testharness.Run(t, nil, filepath.Join(bin, b), "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", b, code, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "-") && !flagLine.MatchString(line) {
				t.Errorf("%s --help: flag line shows a phrase as its value: %q", b, line)
			}
		}
	}
}
