package opencode

import (
	"context"
	"database/sql"
	"encoding/json"
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
	var list []agents.StoredSession
	err = eachRow(ctx, db, sessionsQuery, func(col []string) error {
		list = append(list, agents.StoredSession{ID: col[0], Cwd: col[1], ParentID: col[2], Version: col[3]})
		return nil
	})
	if err != nil {
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

// StoreExport is session id of the store under home as `opencode export`
// prints it, read from the database as StoreSessions reads it: the
// session's row for its header, and each message's and part's data with
// the ids the export adds to it, messages in the order they were made,
// parts in id order (OpenCode's ids ascend). It once ran the CLI: a Bun
// start of ~3.6 CPU-s after every OpenCode turn, which also wrote the
// store (the export updates its project's time).
func StoreExport(ctx context.Context, home, id string) ([]byte, error) {
	path := DBPath(home)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opencode store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", readOnlyDSN(path))
	if err != nil {
		return nil, fmt.Errorf("opencode store %s: %w", path, err)
	}
	defer db.Close()
	// One read transaction: the session, its messages and its parts from
	// one commit, however OpenCode writes meanwhile.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("opencode store %s: %w", path, err)
	}
	defer func() { _ = tx.Rollback() }()
	info, err := sessionInfo(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("opencode store %s: session %s: %w", path, id, err)
	}
	msgs, err := sessionMessages(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("opencode store %s: session %s: %w", path, id, err)
	}
	return json.Marshal(struct {
		Info     SessionInfo      `json:"info"`
		Messages []storedMessages `json:"messages"`
	}{info, msgs})
}

// errNoSession is a session the store does not hold.
var errNoSession = errors.New("session not found")

func sessionInfo(ctx context.Context, tx *sql.Tx, id string) (SessionInfo, error) {
	var s SessionInfo
	err := tx.QueryRowContext(ctx, `SELECT id, slug, project_id, directory, coalesce(parent_id, ''), title, version, time_created, time_updated
 FROM session WHERE id = ?`, id).Scan(&s.ID, &s.Slug, &s.ProjectID, &s.Directory, &s.ParentID, &s.Title, &s.Version, &s.Time.Created, &s.Time.Updated)
	if errors.Is(err, sql.ErrNoRows) {
		return s, errNoSession
	}
	return s, err
}

// storedMessages is one message of an export with its parts, each the
// data of its row with the ids the export adds.
type storedMessages struct {
	Info  json.RawMessage   `json:"info"`
	Parts []json.RawMessage `json:"parts"`
}

func sessionMessages(ctx context.Context, tx *sql.Tx, id string) ([]storedMessages, error) {
	var out []storedMessages
	at := map[string]int{} // message id -> index in out
	err := eachRow(ctx, tx, `SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id`, func(col []string) error {
		rowID, data := col[0], col[1]
		info, err := withIDs(data, map[string]string{"id": rowID, "sessionID": id})
		at[rowID] = len(out)
		out = append(out, storedMessages{Info: info, Parts: []json.RawMessage{}})
		return err
	}, id)
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, tx, `SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY id`, func(col []string) error {
		rowID, msgID, data := col[0], col[1], col[2]
		i, ok := at[msgID]
		if !ok {
			return nil // a part whose message is gone: the export has none
		}
		part, err := withIDs(data, map[string]string{"id": rowID, "sessionID": id, "messageID": msgID})
		out[i].Parts = append(out[i].Parts, part)
		return err
	}, id)
	return out, err
}

// querier is a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// eachRow runs query with args and calls fn with each row's columns, all
// text.
func eachRow(ctx context.Context, q querier, query string, fn func(col []string) error, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]string, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// withIDs is the JSON object data with ids set.
func withIDs(data string, ids map[string]string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &obj); err != nil {
		return nil, err
	}
	for k, v := range ids {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		obj[k] = b
	}
	return json.Marshal(obj)
}
