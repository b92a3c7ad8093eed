package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What runs on cast's node binary (the canary, a dry run's command line)
// says how to get one when there is none: not beside this executable (a
// test binary) and not on PATH, where only an agent CLI is.
func TestNoNodeBinarySaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "codex"), []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		what string
	}{
		{[]string{"agents", "check", "--agent", "codex"}, "cast agents check"},
		{[]string{"exec", "--dry-run", "--agent", "codex", "hi"}, "cast exec --dry-run"},
	} {
		_, errOut, code := runMain(t, "127.0.0.1:1", tc.args...)
		want := []string{tc.what + " runs on cast's node binary", "no node binary of cast's beside", "nor on PATH", "make build"}
		if code != 1 || !saysAll(errOut, want) {
			t.Errorf("cast %s: exit %d, stderr %q; want 1 and %q", strings.Join(tc.args, " "), code, errOut, want)
		}
	}
}
