package agenttest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Age sets back by a minute the mtimes of the files in dir written in the
// last half minute, as if the next look came that much later: past a
// racy window on mtimes (a store's stamp), each write's time still apart
// from the others', and a file not written since left as it is, so
// calling it again changes nothing. No sleep stands in for the time.
func Age(t testing.TB, dir string) {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("agenttest: %v", err)
	}
	for _, e := range files {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("agenttest: %v", err)
		}
		if time.Since(fi.ModTime()) > time.Minute/2 {
			continue
		}
		mt := fi.ModTime().Add(-time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatalf("agenttest: %v", err)
		}
	}
}
