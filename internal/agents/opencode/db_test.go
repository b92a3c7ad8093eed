package opencode

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/opencode/opencodetest"
)

// A store in WAL mode that no OpenCode holds open (its -wal and -shm gone
// with the last connection) lists without a write and is left without
// them; a store not made yet lists none and is not made.
func TestStoreSessionsReadsAClosedStore(t *testing.T) {
	home := t.TempDir()
	if got, err := StoreSessions(context.Background(), home); err != nil || got != nil {
		t.Fatalf("no store: %v %v", got, err)
	}
	if _, err := os.Stat(filepath.Dir(DBPath(home))); !os.IsNotExist(err) {
		t.Fatalf("listing made the store's folder: %v", err)
	}
	db := opencodetest.Open(t, home)
	opencodetest.AddSessions(t, db,
		opencodetest.Session{ID: "ses_b", Directory: "/w/b", ParentID: "ses_a", Created: 2, Updated: 20},
		opencodetest.Session{ID: "ses_a", Directory: "/w/a", Created: 1, Updated: 10},
		opencodetest.Session{ID: "ses_old", Directory: "/w/o", Updated: 5, Archived: 7})
	run(t, db, `INSERT INTO part (id, session_id, time_updated) VALUES ('p1', 'ses_a', 11), ('p2', 'ses_a', 12)`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(DBPath(home) + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("the WAL outlived the last connection: %v", err)
	}
	before, err := os.Stat(DBPath(home))
	if err != nil {
		t.Fatal(err)
	}
	got, err := StoreSessions(context.Background(), home)
	if err != nil {
		t.Fatal(err)
	}
	want := []agents.StoredSession{
		{ID: "ses_a", Cwd: "/w/a", Version: "10/2/12"},
		{ID: "ses_b", Cwd: "/w/b", ParentID: "ses_a", Version: "20/0/0"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %+v, want %+v", got, want)
	}
	after, err := os.Stat(DBPath(home))
	if err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("listing wrote the store: %v %v -> %v", err, before.ModTime(), after.ModTime())
	}
	for _, f := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(DBPath(home) + f); !os.IsNotExist(err) {
			t.Errorf("listing left a %s file: %v", f, err)
		}
	}
}

// While OpenCode holds its store open (its -wal file in place), a listing
// sees what it committed to the WAL and leaves the WAL as it was: the
// stamp does not move with cast's own listing.
func TestStoreSessionsReadsAnOpenStore(t *testing.T) {
	home := t.TempDir()
	db := opencodetest.Open(t, home)
	defer db.Close()
	run(t, db, `PRAGMA wal_autocheckpoint=0`) // the rows stay in the WAL
	opencodetest.AddSessions(t, db, opencodetest.Session{ID: "ses_a", Directory: "/w/a", Created: 1, Updated: 10})
	run(t, db, `INSERT INTO part (id, session_id, time_updated) VALUES ('p1', 'ses_a', 11)`)
	stamp := Driver{}.StoreStamp(home)
	wal, err := os.Stat(DBPath(home) + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	got, err := StoreSessions(context.Background(), home)
	if err != nil {
		t.Fatal(err)
	}
	if want := []agents.StoredSession{{ID: "ses_a", Cwd: "/w/a", Version: "10/1/11"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %+v, want %+v", got, want)
	}
	after, err := os.Stat(DBPath(home) + "-wal")
	if err != nil || after.Size() != wal.Size() || !after.ModTime().Equal(wal.ModTime()) {
		t.Errorf("the listing changed the WAL: %v, %d -> %d bytes", err, wal.Size(), after.Size())
	}
	if s := (Driver{}).StoreStamp(home); s != stamp {
		t.Errorf("the listing moved the stamp: %q -> %q", stamp, s)
	}
}

// StoreExport gives the shape `opencode export` prints: the session's
// header from its row, messages in the order they were made with their
// parts in id order, each with the ids the export adds; a session the
// store does not hold is an error.
func TestStoreExportShape(t *testing.T) {
	home := t.TempDir()
	db := opencodetest.Open(t, home)
	opencodetest.AddSessions(t, db, opencodetest.Session{ID: "ses_1", Directory: "/w", Version: "1.18.33", Created: 5, Updated: 9})
	run(t, db,
		`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES
		 ('msg_b', 'ses_1', 2, 2, '{"role":"assistant","time":{"created":2,"completed":3},"agent":"build"}'),
		 ('msg_a', 'ses_1', 1, 1, '{"role":"user","time":{"created":1},"agent":"build"}'),
		 ('msg_x', 'ses_2', 1, 1, '{"role":"user","time":{"created":1},"agent":"build"}')`,
		`INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES
		 ('prt_2', 'msg_b', 'ses_1', 0, 0, '{"type":"text","text":"second"}'),
		 ('prt_1', 'msg_b', 'ses_1', 0, 0, '{"type":"text","text":"first"}'),
		 ('prt_0', 'msg_a', 'ses_1', 0, 0, '{"type":"text","text":"asked"}')`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := StoreExport(context.Background(), home, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	var ex Export
	if err := json.Unmarshal(out, &ex); err != nil {
		t.Fatal(err)
	}
	if want := (SessionInfo{ID: "ses_1", Slug: "a-slug", ProjectID: "global", Directory: "/w", Title: "a title", Version: "1.18.33", Time: TimeSpan{Created: 5, Updated: 9}}); ex.Info != want {
		t.Errorf("header %+v, want %+v", ex.Info, want)
	}
	var got []string
	for _, m := range ex.Messages {
		got = append(got, m.Info.ID+"/"+m.Info.SessionID+"/"+m.Info.Role)
		for _, p := range m.Parts {
			got = append(got, p.ID+"/"+p.MessageID+"/"+p.SessionID+"/"+p.Text)
		}
	}
	want := []string{"msg_a/ses_1/user", "prt_0/msg_a/ses_1/asked", "msg_b/ses_1/assistant", "prt_1/msg_b/ses_1/first", "prt_2/msg_b/ses_1/second"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exported %q, want %q", got, want)
	}
	if _, err := StoreExport(context.Background(), home, "ses_none"); err == nil || !strings.Contains(err.Error(), "session not found") {
		t.Errorf("a session not in the store: %v", err)
	}
}

// run runs stmts in the store db (opencodetest.Open), on its one
// connection.
func run(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// The message rows OpenCode writes while its turn streams are read as it
// writes them: the reader's completion check (time.completed of the last
// message, time.end of a text or reasoning part) applies to the store's
// rows, so the text being written is left out until it is done.
func TestStoreExportLeavesOutTextStillStreaming(t *testing.T) {
	home := t.TempDir()
	db := opencodetest.Open(t, home)
	defer db.Close()
	opencodetest.AddSessions(t, db, opencodetest.Session{ID: "ses_1", Directory: "/w", Created: 1, Updated: 1})
	run(t, db,
		`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES
		 ('msg_a', 'ses_1', 1, 1, '{"role":"user","time":{"created":1}}'),
		 ('msg_b', 'ses_1', 2, 2, '{"role":"assistant","modelID":"m1","time":{"created":2}}')`,
		`INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES
		 ('prt_0', 'msg_a', 'ses_1', 1, 1, '{"type":"text","text":"SQ-U1 go"}'),
		 ('prt_1', 'msg_b', 'ses_1', 2, 2, '{"type":"text","text":"SQ-A1 half","time":{"start":2}}')`)
	read := func() []string {
		t.Helper()
		msgs, err := Driver{}.Export(context.Background(), "", nil, agents.Target{Home: home}, "ses_1")
		if err != nil {
			t.Fatal(err)
		}
		return brief(msgs)
	}
	if got, want := read(), []string{"user SQ-U1 go"}; !reflect.DeepEqual(got, want) {
		t.Errorf("streaming: read %q, want %q", got, want)
	}
	run(t, db, `UPDATE message SET data = '{"role":"assistant","modelID":"m1","time":{"created":2,"completed":4}}' WHERE id = 'msg_b'`,
		`UPDATE part SET data = '{"type":"text","text":"SQ-A1 whole","time":{"start":2,"end":3}}' WHERE id = 'prt_1'`)
	if got, want := read(), []string{"user SQ-U1 go", "assistant SQ-A1 whole"}; !reflect.DeepEqual(got, want) {
		t.Errorf("done: read %q, want %q", got, want)
	}
}
