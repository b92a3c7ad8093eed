package fsutil

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A scratch file has no name in the temporary folder from the start, and a
// child process writing to it through an inherited descriptor is read back
// through the same one.
func TestScratchFileLeavesNoName(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	f, err := ScratchFile("cast-scratch-*.out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "cast-scratch-*")); len(left) != 0 {
		t.Fatalf("the scratch file has a name: %v", left)
	}
	cmd := exec.Command("echo", "from the child")
	cmd.Stdout = f
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	if err != nil || string(got) != "from the child\n" {
		t.Fatalf("read back %q, %v", got, err)
	}
}
