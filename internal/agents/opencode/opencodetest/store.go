// Package opencodetest makes OpenCode stores for tests of the packages
// that read one (OpenCode's own reader, the CLI's restore) without running OpenCode: the tables and columns cast reads, in
// WAL mode as OpenCode keeps them.
package opencodetest

import (
	"cmp"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/cast-dev/cast/internal/agents"
)

// Session is one session row.
type Session struct {
	ID, Directory, ParentID string
	Created, Updated        int64
	Archived                int64  // 0: not archived
	Version                 string // the OpenCode that made it; "" is "test"
}

// Store makes the store under home (an XDG_DATA_HOME) holding sessions,
// with no messages or parts. OpenCode's package must be linked (the
// registry names its store's path).
func Store(t testing.TB, home string, sessions ...Session) {
	t.Helper()
	db := Open(t, home)
	defer db.Close()
	AddSessions(t, db, sessions...)
}

// Open makes the store under home with OpenCode's tables, empty, and
// returns it open on one connection, as OpenCode holds it (its -wal and
// -shm files in place while it is open): closing it is the caller's.
func Open(t testing.TB, home string) *sql.DB {
	t.Helper()
	a, ok := agents.Lookup("opencode")
	d, _ := a.Driver()
	sd, isStore := d.(agents.StoreDriver)
	if !ok || !isStore {
		t.Fatal("opencode is not linked, or keeps no store")
	}
	path := sd.StorePath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // a connection's settings (a PRAGMA) hold for the next statement
	for _, q := range []string{
		`PRAGMA journal_mode=WAL`,
		`CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER, time_archived INTEGER)`,
		`CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT)`,
		`CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT)`,
	} {
		if _, err := db.Exec(q); err != nil {
			_ = db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// AddSessions adds session rows to the store db (Open).
func AddSessions(t testing.TB, db *sql.DB, sessions ...Session) {
	t.Helper()
	for _, s := range sessions {
		var parent, archived any
		if s.ParentID != "" {
			parent = s.ParentID
		}
		if s.Archived != 0 {
			archived = s.Archived
		}
		if _, err := db.Exec(`INSERT INTO session VALUES (?, 'global', ?, 'a-slug', ?, 'a title', ?, ?, ?, ?)`,
			s.ID, parent, s.Directory, cmp.Or(s.Version, "test"), s.Created, s.Updated, archived); err != nil {
			t.Fatal(err)
		}
	}
}
