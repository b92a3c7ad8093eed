package treemove

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"testing"
)

// tree is every entry under dir, .git included, with what a write changes.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		got[p] = fmt.Sprint(fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Import returns only once the tree it wrote is synced, as it stands at
// the end (no write after the sync): the node writes its synced done
// marker right after, and a power loss must not keep the marker but lose
// part of the tree, or the import is never done again.
func TestImportSyncsTheTreeBeforeReturning(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	cases := []struct {
		name string
		dst  func(t *testing.T, src string) string
	}{
		{"new directory", func(t *testing.T, _ string) string { return filepath.Join(t.TempDir(), "new", "dst") }},
		{"older clone", clone},
		{"already there", func(t *testing.T, src string) string {
			dst := filepath.Join(t.TempDir(), "dst")
			roundTrip(t, src, dst)
			return dst
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newRepo(t)
			write(t, src, "b.txt", "moved\n")
			write(t, src, "new/file.txt", "new\n")
			dst := c.dst(t, src)
			bundle := filepath.Join(t.TempDir(), "x.bundle")
			m, err := Export(ctx, src, bundle)
			if err != nil {
				t.Fatal(err)
			}
			var roots []string
			var atSync map[string]string
			real := syncTree
			syncTree = func(root string) error {
				roots, atSync = append(roots, root), tree(t, root)
				return real(root)
			}
			t.Cleanup(func() { syncTree = real })
			if err := Import(ctx, bundle, dst, m); err != nil {
				t.Fatal(err)
			}
			if len(roots) != 1 || roots[0] != dst {
				t.Fatalf("synced %v, want the imported tree %s once", roots, dst)
			}
			if after := tree(t, dst); !maps.Equal(atSync, after) {
				t.Errorf("the tree changed after its sync:\nat sync %v\nafter   %v", atSync, after)
			}
		})
	}
}
