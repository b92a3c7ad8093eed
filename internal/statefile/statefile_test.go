package statefile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// members reads the state at path and returns its "sessions" object.
func members(t *testing.T, path string) map[string]string {
	t.Helper()
	doc, err := Read(path, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Sessions map[string]string `json:"sessions"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatalf("state is not JSON: %v\n%s", err, doc)
	}
	return st.Sessions
}

func open(t *testing.T, path string) *File {
	t.Helper()
	f, _, err := Open(path, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func put(t *testing.T, f *File, key, value string) {
	t.Helper()
	var v []byte
	if value != "" {
		v, _ = json.Marshal(value)
	}
	if err := f.Put(key, v); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, f *File, sessions map[string]string) {
	t.Helper()
	doc, _ := json.Marshal(map[string]any{"sessions": sessions, "fleet": "x"})
	if err := f.Snapshot(doc); err != nil {
		t.Fatal(err)
	}
}

// Each case writes through a File, may damage the files the way a crash
// would, and reads back what a restarted daemon would load.
func TestReadAfterCrash(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, f *File, path string)
		want  map[string]string
	}{
		{"records replay onto the snapshot", func(t *testing.T, f *File, _ string) {
			snapshot(t, f, map[string]string{"a": "1", "b": "1"})
			put(t, f, "a", "2")
			put(t, f, "c", "1")
			put(t, f, "b", "") // removed
		}, map[string]string{"a": "2", "c": "1"}},
		{"a torn last append is not applied", func(t *testing.T, f *File, path string) {
			snapshot(t, f, map[string]string{"a": "1"})
			put(t, f, "a", "2")
			appendRaw(t, JournalPath(path), `{"k":"a","v":"3"}`) // no newline: cut short
		}, map[string]string{"a": "2"}},
		{"a journal after a snapshot it does not follow is ignored", func(t *testing.T, f *File, path string) {
			snapshot(t, f, map[string]string{"a": "1"})
			put(t, f, "a", "2")
			// A crash after the next snapshot's rename, before its journal.
			doc, _ := json.Marshal(map[string]any{"sessions": map[string]string{"a": "5"}})
			if err := os.WriteFile(path, doc, 0o600); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a": "5"}},
		{"a snapshot equal to the last one empties its journal", func(t *testing.T, f *File, _ string) {
			snapshot(t, f, map[string]string{"a": "1"})
			put(t, f, "a", "2")
			snapshot(t, f, map[string]string{"a": "1"}) // the change undone by a whole-state write
		}, map[string]string{"a": "1"}},
		{"a failed append refuses the next and a snapshot recovers", func(t *testing.T, f *File, _ string) {
			snapshot(t, f, map[string]string{"a": "1"})
			f.j.Close() // the next write fails for real
			if err := f.Put("a", []byte(`"2"`)); err == nil {
				t.Fatal("an append to a closed journal succeeded")
			}
			if !f.Due() {
				t.Fatal("a snapshot is not due after a failed append")
			}
			if err := f.Put("a", []byte(`"3"`)); err == nil {
				t.Fatal("an append after a failed one was taken")
			}
			snapshot(t, f, map[string]string{"a": "4"})
			put(t, f, "b", "1")
		}, map[string]string{"a": "4", "b": "1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			f := open(t, path)
			c.write(t, f, path)
			if got := members(t, path); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("state read back %v, want %v", got, c.want)
			}
			// Opening again writes the merged state as its snapshot and
			// reads the same.
			f.Close()
			g := open(t, path)
			if got := members(t, path); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("after reopening: %v, want %v", got, c.want)
			}
			put(t, g, "z", "1")
			if got := members(t, path)["z"]; got != "1" {
				t.Fatalf("an append after reopening read back %q", got)
			}
		})
	}
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	j, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestOpenWithoutState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f, doc, err := Open(path, "sessions")
	if err != nil || doc != nil {
		t.Fatalf("Open of nothing: %s, %v", doc, err)
	}
	defer f.Close()
	if !f.Due() {
		t.Fatal("no snapshot yet, but appending is allowed")
	}
	if err := f.Put("a", []byte(`"1"`)); err == nil {
		t.Fatal("an append before any snapshot was taken")
	}
}

// The journal may grow to the snapshot's size (at least minJournal), so
// rewriting the snapshot costs no more than the appends since the last.
func TestSnapshotDueWhenTheJournalOutgrowsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	big := map[string]string{}
	for i := range 4000 {
		big[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("x", i%50)+string(rune(i))] = strings.Repeat("v", 100)
	}
	snapshot(t, f, big)
	value := []byte(`"` + strings.Repeat("w", 200) + `"`)
	n := 0
	for !f.Due() {
		if err := f.Put("k", value); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if f.jsize <= f.snapSize || f.jsize > f.snapSize+int64(len(value))+64 || f.snapSize <= minJournal {
		t.Fatalf("due at a journal of %d bytes after %d appends, snapshot %d bytes", f.jsize, n, f.snapSize)
	}
}

func TestRewriteDropsTheJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	snapshot(t, f, map[string]string{"a": "1"})
	put(t, f, "a", "2")
	f.Close()
	if err := Rewrite(path, "sessions", []byte(`{"sessions":{"b":"1"}}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := members(t, path), map[string]string{"b": "1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after Rewrite: %v, want %v", got, want)
	}
	info, err := os.Stat(JournalPath(path))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("journal after Rewrite: %v, %v", info, err)
	}
}

// A daemon starts on what it read even when the snapshot Open writes
// cannot be written (a full disk; here a name too long for the temporary
// file beside it, a real failure of the same write): the File stays Due,
// so its first write is a snapshot again, and nothing is appended.
func TestOpenReadsWhenItCannotWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), strings.Repeat("s", 245)+".json") // the temp name passes 255 bytes
	if err := os.WriteFile(path, []byte(`{"sessions":{"a":"1"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, doc, err := Open(path, "sessions")
	if err != nil {
		t.Fatalf("Open failed where it could read: %v", err)
	}
	defer f.Close()
	if string(doc) != `{"sessions":{"a":"1"}}` {
		t.Fatalf("Open read %s", doc)
	}
	if !f.Due() {
		t.Fatal("a snapshot is not due after the one Open wrote failed")
	}
	if err := f.Put("a", []byte(`"2"`)); err == nil {
		t.Fatal("an append was taken after the snapshot failed")
	}
}

// Records of another object of the snapshot (PutIn) replay onto that
// object, and leave the File's own alone.
func TestPutInAnotherField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	doc, _ := json.Marshal(map[string]any{"sessions": map[string]string{"a": "1"}, "released": map[string]string{"x": "1", "y": "1"}})
	if err := f.Snapshot(doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ field, key, value string }{{"released", "x", ""}, {"released", "z", `"2"`}, {"sessions", "b", `"3"`}, {"", "a", `"4"`}} {
		var v []byte
		if r.value != "" {
			v = []byte(r.value)
		}
		if err := f.PutIn(r.field, r.key, v); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Sessions, Released map[string]string }
	if err := json.Unmarshal(got, &st); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "4", "b": "3"}; !reflect.DeepEqual(st.Sessions, want) {
		t.Errorf("sessions %v, want %v", st.Sessions, want)
	}
	if want := map[string]string{"y": "1", "z": "2"}; !reflect.DeepEqual(st.Released, want) {
		t.Errorf("released %v, want %v", st.Released, want)
	}
}
