//go:build !linux

package fsutil

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Without syncfs, SyncTree syncs every file and directory of the tree, each directory
// after everything in it, and the root's parent last.
func TestSyncTreeSyncsEveryEntryChildrenFirst(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	for _, f := range []string{"a.txt", "sub/b.txt", "sub/deep/c.txt", ".git/objects/ab/cdef"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	var synced []string
	real := syncPath
	syncPath = func(p string) error {
		synced = append(synced, p)
		return real(p)
	}
	t.Cleanup(func() { syncPath = real })

	if err := SyncTree(root); err != nil {
		t.Fatal(err)
	}
	var want []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.IsDir() || d.Type().IsRegular()) {
			want = append(want, p)
		}
		return err
	})
	want = append(want, filepath.Dir(root))
	got := slices.Clone(synced)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("synced %v, want each of %v once", synced, want)
	}
	at := func(p string) int { return slices.Index(synced, p) }
	for _, p := range synced {
		if parent := filepath.Dir(p); p != filepath.Dir(root) && at(parent) < at(p) {
			t.Errorf("%s synced before %s, which it holds", parent, p)
		}
	}
}
