package store_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// TestSweepRemovesTempFilesOfCrashedWrites: a folder store's write that
// crashed mid-way leaves its hidden temp file (a segment's worth, up to
// ~8 MiB); the sweep deletes it once older than any write could still be
// running, and leaves a younger one (a write in flight) alone.
func TestSweepRemovesTempFilesOfCrashedWrites(t *testing.T) {
	etcd := testharness.StartEtcd(t, nil)
	dir := t.TempDir()
	s := folderTiered(t, etcd, dir, nil)
	segs := filepath.Join(dir, "segments")
	if err := os.MkdirAll(segs, 0o700); err != nil {
		t.Fatal(err)
	}
	// What fsutil.WriteAtomic leaves when the process dies before its rename.
	temp := func(name string, age time.Duration) string {
		f, err := os.CreateTemp(segs, "."+name+".tmp*")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, 1<<10)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		at := time.Now().Add(-age)
		if err := os.Chtimes(f.Name(), at, at); err != nil {
			t.Fatal(err)
		}
		return f.Name()
	}
	stale := temp("0123abcd", 2*time.Hour)
	inFlight := temp("4567abcd", 0)
	if _, err := s.SweepSegments(ctxT(t), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the crashed write's temp file is still there after the sweep (%v)", err)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("the sweep removed a write in flight's temp file: %v", err)
	}
}
