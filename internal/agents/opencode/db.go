package opencode

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go

	"github.com/cast-dev/cast/internal/agents"
)

// busyTimeoutMS is how long a read waits for OpenCode's own write lock
// (a checkpoint of its write-ahead log) before failing.
const busyTimeoutMS = 5000

// sessionsQuery lists every session in the store, of every project (`opencode
// session list` shows only the project of the folder it runs in), with a
// version that changes with any of its parts.
const sessionsQuery = `SELECT s.id AS id, s.directory AS directory, coalesce(s.parent_id, '') AS parent_id,
 s.time_updated || '/' || (SELECT count(*) FROM part p WHERE p.session_id = s.id) || '/' ||
 (SELECT coalesce(max(p.time_updated), 0) FROM part p WHERE p.session_id = s.id) AS version
 FROM session s WHERE s.time_archived IS NULL ORDER BY s.time_created`

// StoreSessions lists the sessions in the store under home by reading its
// database, read-only. It once ran the same query through `opencode db`:
// a Bun start of seconds of CPU at every change of the store, which the
// node lists after each (and which wrote the store as it started). A
// store not made yet lists none, and is not made.
func StoreSessions(ctx context.Context, home string) ([]agents.StoredSession, error) {
	path := DBPath(home)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	db, err := sql.Open("sqlite", readOnlyDSN(path))
	if err != nil {
		return nil, fmt.Errorf("opencode store %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, sessionsQuery)
	if err != nil {
		return nil, fmt.Errorf("opencode store %s: list sessions: %w", path, err)
	}
	defer rows.Close()
	var list []agents.StoredSession
	for rows.Next() {
		var s agents.StoredSession
		if err := rows.Scan(&s.ID, &s.Cwd, &s.ParentID, &s.Version); err != nil {
			return nil, fmt.Errorf("opencode store %s: read a session: %w", path, err)
		}
		list = append(list, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("opencode store %s: list sessions: %w", path, err)
	}
	return list, nil
}

// readOnlyDSN opens the store at path to read, writing and making nothing
// there. OpenCode keeps it in WAL mode and leaves its -wal and -shm files
// in place between runs (the stamp is the -wal file's): read-only, a
// connection reads the last commit through them while OpenCode writes, and
// does not checkpoint or remove them when it closes, as a writable one
// would. Without a -wal file (a store some other program closed last) a
// read-only connection would make both files and leave them; immutable
// reads the database file alone instead. Should OpenCode start writing
// during that read, the read may fail or miss the write: the write makes
// the -wal file, which moves the stamp, and the next scan lists again.
func readOnlyDSN(path string) string {
	q := fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)", busyTimeoutMS)
	if _, err := os.Stat(path + "-wal"); errors.Is(err, os.ErrNotExist) {
		q += "&immutable=1"
	}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q}).String()
}
