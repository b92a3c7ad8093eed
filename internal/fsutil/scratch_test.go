package fsutil

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A scratch file has no name in its folder from the start, and what a
// child process writes to it through an inherited descriptor is read back
// through the same one.
func TestScratchLeavesNoName(t *testing.T) {
	dir := t.TempDir()
	s, err := NewScratch(dir, "cast-scratch-*.out")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("the scratch file has a name: %v", left)
	}
	cmd := exec.Command("echo", "from the child")
	cmd.Stdout = s.File
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "from the child\n" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the folder: %v", err)
	}
}
