package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

// SyncTree syncs the filesystem the tree is on, once, and fails when the
// tree cannot be read.
func TestSyncTreeSyncsTheTreesFilesystem(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	for _, f := range []string{"a.txt", "sub/deep/b.txt", ".git/objects/ab/cdef"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var synced []string
	real := syncFS
	syncFS = func(p string) error {
		synced = append(synced, p)
		return real(p)
	}
	t.Cleanup(func() { syncFS = real })
	if err := SyncTree(root); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != filepath.Dir(root) {
		t.Fatalf("synced %v, want the one filesystem of the tree, once (through %s)", synced, filepath.Dir(root))
	}
	if err := SyncTree(filepath.Join(root, "missing")); err == nil {
		t.Error("a tree that is not there reported synced")
	}
}
