// Package statefile keeps a daemon's state on disk at a cost that follows
// what changed, not how much there is: a snapshot (one JSON document) and
// a journal of the records changed since it, each appended and synced on
// its own. Opening replays the journal into the snapshot; once the journal
// outgrows the snapshot, the owner writes a new snapshot and the journal
// starts again. A node owning 10,000 sessions would otherwise rewrite
// every session's record for each change to one of them.
//
// The records are the members of objects of the snapshot: of its field
// ("sessions" for the node) unless a record names another (PutIn): a
// journal line holds one member's whole new value, or its removal, so
// replaying a line twice changes nothing.
//
// Crash safety rests on two rules. A journal names the snapshot it
// follows by the snapshot's SHA-256 (its first line), so a journal left
// behind by a crash between writing a snapshot and starting its journal
// is ignored: the snapshot holds everything it held. And nothing is ever
// appended after a line that may be torn: a failed append makes the next
// write a snapshot (Due), and opening stops at the first line that does
// not parse, which can only be the last one, never acknowledged.
package statefile

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/fsutil"
)

// minJournal is how large a journal may grow before a snapshot is due
// however small the snapshot: a small state is cheap to rewrite, and a
// snapshot for every few changes would cost more than the journal saves.
const minJournal = 256 << 10

// File is the state at one path: the snapshot there and its journal
// beside it (JournalPath). It is not safe for concurrent use: its owner
// serialises writes (the node's state lock).
type File struct {
	path, field string
	base        string   // hex SHA-256 of the snapshot the journal follows
	j           *os.File // the journal, open for appending
	jsize       int64
	snapSize    int64
	broken      bool
}

// header is a journal's first line.
type header struct {
	Base string `json:"base"`
}

// record is one journal line: the member Key of Field (the File's field
// when empty) set to Value, or removed when Value is absent.
type record struct {
	Field string          `json:"f,omitempty"`
	Key   string          `json:"k"`
	Value json.RawMessage `json:"v,omitempty"`
}

// JournalPath is the journal beside the snapshot at path
// (state.json -> state.journal).
func JournalPath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".journal"
}

// Open reads the state at path, the journal's records applied to the
// snapshot's field object, and returns it with the File to write it
// through (doc is nil when there is no state yet). The merged state is
// written as the new snapshot first, so a journal with a torn last line
// is never appended to; when that write fails (a full disk), the File
// stays Due and the owner's first write tries the snapshot again, so a
// daemon still starts on what it read.
func Open(path, field string) (*File, []byte, error) {
	doc, err := read(path, field)
	if err != nil {
		return nil, nil, err
	}
	f := &File{path: path, field: field, broken: true}
	if doc != nil {
		_ = f.Snapshot(doc)
	}
	return f, doc, nil
}

// Read returns the state at path as Open would, writing nothing: what a
// daemon started now would load (tests read a daemon's state with it).
func Read(path, field string) ([]byte, error) {
	return read(path, field)
}

// Rewrite replaces the state at path with doc and drops its journal, as
// if doc were a snapshot with nothing after it (for a test that edits a
// stopped daemon's state).
func Rewrite(path, field string, doc []byte) error {
	f := &File{path: path, field: field, broken: true}
	defer f.Close()
	return f.Snapshot(doc)
}

// Put appends the field's member key set to value (nil removes it) and
// syncs it: when Put returns nil the change survives a crash.
func (f *File) Put(key string, value []byte) error {
	return f.PutIn("", key, value)
}

// PutIn is Put for a member of another object of the snapshot, field
// ("" is the File's own).
func (f *File) PutIn(field, key string, value []byte) error {
	if f.broken || f.j == nil {
		return errors.New("statefile: the journal needs a snapshot first")
	}
	if field == f.field {
		field = ""
	}
	line, err := json.Marshal(record{Field: field, Key: key, Value: value})
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if _, err = f.j.Write(line); err == nil {
		err = f.j.Sync()
	}
	if err != nil {
		f.broken = true // the line may be torn: nothing may follow it
		return err
	}
	f.jsize += int64(len(line))
	return nil
}

// Due reports whether the next write should be a snapshot: the journal
// outgrew the snapshot (so rewriting costs no more than what was
// appended), or an append failed.
func (f *File) Due() bool {
	return f.broken || f.j == nil || f.jsize > max(minJournal, f.snapSize)
}

// Snapshot replaces the state with doc (a JSON object) and starts an empty
// journal after it.
func (f *File) Snapshot(doc []byte) error {
	sum := sha256.Sum256(doc)
	base := hex.EncodeToString(sum[:])
	// A snapshot equal to the one on disk is not written again: its
	// journal is emptied instead (below), after which nothing changes.
	if base != f.base {
		f.base = "" // unknown until a journal follows the new snapshot
		if err := fsutil.WriteFileAtomic(f.path, doc, 0o600); err != nil {
			f.broken = true
			return err
		}
	}
	if err := f.startJournal(base); err != nil {
		f.base, f.broken = "", true
		return err
	}
	f.base, f.snapSize, f.broken = base, int64(len(doc)), false
	return nil
}

// startJournal replaces the journal with one holding only the header for
// base, and keeps it open for appending.
func (f *File) startJournal(base string) error {
	h, err := json.Marshal(header{Base: base})
	if err != nil {
		return err
	}
	h = append(h, '\n')
	jp := JournalPath(f.path)
	if err := fsutil.WriteFileAtomic(jp, h, 0o600); err != nil {
		return err
	}
	j, err := os.OpenFile(jp, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if f.j != nil {
		f.j.Close()
	}
	f.j, f.jsize = j, int64(len(h))
	return nil
}

// Close closes the journal.
func (f *File) Close() error {
	if f.j == nil {
		return nil
	}
	err := f.j.Close()
	f.j = nil
	return err
}

// read merges the snapshot at path with its journal.
func read(path, field string) ([]byte, error) {
	snap, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	recs, err := journal(JournalPath(path), snap)
	if err != nil || len(recs) == 0 {
		return snap, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(snap, &top); err != nil {
		return nil, fmt.Errorf("statefile: %s: %w", path, err)
	}
	objects := map[string]map[string]json.RawMessage{}
	for _, r := range recs {
		name := cmp.Or(r.Field, field)
		members, ok := objects[name]
		if !ok {
			members = map[string]json.RawMessage{}
			if raw := top[name]; len(raw) > 0 && string(raw) != "null" {
				if err := json.Unmarshal(raw, &members); err != nil {
					return nil, fmt.Errorf("statefile: %s: %s: %w", path, name, err)
				}
			}
			objects[name] = members
		}
		if r.Value == nil {
			delete(members, r.Key)
		} else {
			members[r.Key] = r.Value
		}
	}
	for name, members := range objects {
		if top[name], err = json.Marshal(members); err != nil {
			return nil, err
		}
	}
	return json.Marshal(top)
}

// journal returns the records of the journal at jp that follow snap: none
// when there is no journal or it follows another snapshot. Only lines
// ended by a newline count (an append cut short by a crash has none), and
// reading stops at the first line that is not a record.
func journal(jp string, snap []byte) ([]record, error) {
	b, err := os.ReadFile(jp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(b, []byte("\n"))
	lines = lines[:len(lines)-1] // what follows the last newline: empty, or cut short
	var h header
	if len(lines) == 0 || json.Unmarshal(lines[0], &h) != nil {
		return nil, nil
	}
	sum := sha256.Sum256(snap)
	if h.Base != hex.EncodeToString(sum[:]) {
		return nil, nil
	}
	var recs []record
	for _, line := range lines[1:] {
		var r record
		if json.Unmarshal(line, &r) != nil || r.Key == "" {
			break
		}
		recs = append(recs, r)
	}
	return recs, nil
}
