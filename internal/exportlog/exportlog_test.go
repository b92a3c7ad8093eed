package exportlog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/exportlog"
)

// An agent keeping its sessions in a store (OpenCode's database) has every
// export written at the same path: each export keeps its record, found by
// agent and native id, while a file written again for another cast
// session still holds only that one.
func TestLogKeepsEveryStoredSessionExported(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "opencode.db")
	if err := os.WriteFile(db, []byte("rows"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := exportlog.Load(filepath.Join(dir, exportlog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ session, native string }{{"c1", "ses_1"}, {"c2", "ses_2"}} {
		if err := l.Put(exportlog.Key("opencode", dir, e.session), e.session, e.native, db); err != nil {
			t.Fatal(err)
		}
	}
	l, err = exportlog.Load(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ session, native string }{{"c1", "ses_1"}, {"c2", "ses_2"}} {
		if r, ok := l.ByNative("opencode", e.native); !ok || r.SessionID != e.session {
			t.Fatalf("%s: record %+v, %v; want cast session %s", e.native, r, ok, e.session)
		}
	}
	if _, ok := l.ByNative("claude", "ses_1"); ok {
		t.Fatal("another agent's native id matched")
	}
	// A file written again for another cast session holds that one only.
	file := filepath.Join(dir, "n1.jsonl")
	if err := os.WriteFile(file, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"c3", "c4"} {
		if err := l.Put(exportlog.Key("claude", dir, s), s, "n1", file); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := l.ByPath(file); !ok || r.SessionID != "c4" {
		t.Fatalf("file's record %+v, %v; want c4's", r, ok)
	}
	if r, ok := l.ByNative("claude", "n1"); !ok || r.SessionID != "c4" {
		t.Fatalf("file's record by native id %+v, %v; want c4's", r, ok)
	}
}
