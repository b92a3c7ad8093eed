package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWithin(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	other := filepath.Join(root, "other")
	for _, d := range []string{data, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// other/link -> data; datalink -> data
	if err := os.Symlink(data, filepath.Join(other, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(data, filepath.Join(root, "datalink")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "real.key"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(data, "real.key"), filepath.Join(other, "file.key")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{filepath.Join(data, "secrets.key"), data, true},
		{data, data, true},
		{filepath.Join(data, "not", "yet", "made.key"), data, true},
		{filepath.Join(other, "secrets.key"), data, false},
		{filepath.Join(root, "data2", "secrets.key"), data, false}, // a sibling sharing the prefix
		{filepath.Join(other, "link", "secrets.key"), data, true},  // through a linked dir
		{filepath.Join(other, "file.key"), data, true},             // a linked file
		{filepath.Join(data, "secrets.key"), filepath.Join(root, "datalink"), true},
		{filepath.Join(data, "..", "other", "secrets.key"), data, false},
		{"relative.key", data, false},
	} {
		got, err := Within(tc.path, tc.dir)
		if err != nil || got != tc.want {
			t.Errorf("Within(%s, %s) = %v, %v; want %v", tc.path, tc.dir, got, err, tc.want)
		}
	}
}
