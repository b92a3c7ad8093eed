package agenttest

import (
	"os"
	"testing"
)

// RootOnlyDir is a fresh folder that only root can write, as can only
// root every folder above it, for programs that trust only such files
// (Gemini CLI's system settings: gemini.CheckSystemFile); "" when the test does not run as root.
// It is made under the test's working directory (its package folder),
// since t.TempDir() is under /tmp, which anyone can write, and removed
// after the test.
func RootOnlyDir(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.MkdirTemp(wd, ".root-only-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
