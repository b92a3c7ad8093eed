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

// A cast session written twice into one folder under two native ids (a
// Codex restore gets a new one each time, an export of a changed file
// does too) keeps a record of each file while it is there: a node that
// had not looked at the first before the second was written knows it as
// the session's only from here (it adopted it as a new session holding a
// copy). Only the newest is the one an export may rewrite; a deleted
// earlier file's record goes.
func TestLogKeepsEveryFileOfASession(t *testing.T) {
	dir := t.TempDir()
	l, err := exportlog.Load(filepath.Join(dir, exportlog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	key := exportlog.Key("codex", dir, "c1")
	var files []string
	for _, id := range []string{"n1", "n2", "n3"} {
		f := filepath.Join(dir, id+".jsonl")
		if err := os.WriteFile(f, []byte(id+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := l.Put(key, "c1", id, f); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	l, err = exportlog.Load(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		id := []string{"n1", "n2", "n3"}[i]
		if r, ok := l.ByPath(f); !ok || r.SessionID != "c1" || r.NativeID != id {
			t.Fatalf("%s: record %+v, %v; want c1's %s", f, r, ok, id)
		}
		if r, ok := l.ByNative("codex", id); !ok || r.Path != f {
			t.Fatalf("%s by native id: record %+v, %v; want %s", id, r, ok, f)
		}
	}
	if r, ok := l.Unchanged(key); !ok || r.NativeID != "n3" {
		t.Fatalf("the file an export may rewrite: %+v, %v; want n3", r, ok)
	}
	// The first file deleted: its record goes at the next write.
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(key, "c1", "n3", files[2]); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.ByPath(files[0]); ok {
		t.Fatal("a deleted earlier file keeps its record")
	}
	if _, ok := l.ByPath(files[1]); !ok {
		t.Fatal("an earlier file still there lost its record")
	}
}
