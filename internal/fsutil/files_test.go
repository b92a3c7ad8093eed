package fsutil

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestReadAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := ReadAt(path, func(r io.ReaderAt, size int64) error {
		b := make([]byte, size)
		_, err := r.ReadAt(b, 0)
		got = string(b)
		return err
	}); err != nil || got != "hello" {
		t.Fatalf("ReadAt = %q, %v; want hello, nil", got, err)
	}
	stop := errors.New("stop")
	if err := ReadAt(path, func(io.ReaderAt, int64) error { return stop }); err != stop {
		t.Fatalf("read's error: got %v, want it returned", err)
	}
	called := false
	err := ReadAt(filepath.Join(t.TempDir(), "missing"), func(io.ReaderAt, int64) error { called = true; return nil })
	if !errors.Is(err, os.ErrNotExist) || called {
		t.Fatalf("missing file: err %v, read called %v; want ErrNotExist and no call", err, called)
	}
}

// WriteFileAtomic leaves the new bytes and no temp file; SyncDir, its
// last step, fails on a folder that is not there.
func TestWriteFileAtomicAndSyncDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"one", "two"} {
		if err := WriteFileAtomic(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != data {
			t.Fatalf("after writing %q: %q, %v", data, got, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries left, want the file alone", len(entries))
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("SyncDir of a missing folder: %v, want not-exist", err)
	}
}
