// Package exportlog is the record of the native sessions cast wrote into
// an agent's own folder (`cast export`, `cast restore`): each file's native
// id, the cast session it holds and its digest as cast left it. The CLI
// reads it to rewrite only a file nobody changed since; a node's adoption
// (internal/adopt) reads it to know such a file as the cast session it
// came from, not a new one.
package exportlog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/cast-dev/cast/internal/fsutil"
)

// FileName is the log's name, kept beside the CLI's contexts file.
const FileName = "exports.json"

// Record is one native session cast wrote.
type Record struct {
	NativeID string `json:"native_id"`
	Path     string `json:"path"`
	SHA256   string `json:"sha256"`
	// SessionID is the cast session written; Size the file's size as cast
	// left it (both empty in records of older versions).
	SessionID string `json:"session_id,omitempty"`
	Size      int64  `json:"size,omitempty"`
}

// Log is what cast exported, keyed by agent, agent folder and cast
// session (Key): the newest file written for it, with the earlier ones
// still there under keys of their own (earlierKey).
type Log struct {
	path    string
	Records map[string]Record `json:"exports"`
}

// Key is the record key of cast session sessionID written for agent in
// its folder home.
func Key(agent, home, sessionID string) string {
	return agent + "\x00" + home + "\x00" + sessionID
}

// Lock holds the log's lock file (beside it) while a native file is
// written and noted: a reader that waits for it (Settled) never finds
// a file cast wrote without its record. Unlock the returned hold.
func Lock(path string) (*fsutil.FileLock, error) {
	return fsutil.LockFile(path+".lock", true)
}

// Settled reads the log once no write is half done (Lock): what a node
// reads before it takes a new native file for one the user made.
func Settled(path string) (*Log, error) {
	l, err := fsutil.LockFile(path+".lock", false)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	return Load(path)
}

// Path is where the log is kept.
func (l *Log) Path() string { return l.path }

// Load reads the log at path (empty when there is none yet).
func Load(path string) (*Log, error) {
	l := &Log{path: path, Records: map[string]Record{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, l); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it and cast export writes new native sessions)", path, err)
	}
	if l.Records == nil {
		l.Records = map[string]Record{}
	}
	return l, nil
}

// Unchanged is the record of key when its file is still what cast wrote.
func (l *Log) Unchanged(key string) (Record, bool) {
	rec, ok := l.Records[key]
	if !ok || rec.NativeID == "" {
		return rec, false
	}
	sum, err := FileSHA256(rec.Path)
	return rec, err == nil && sum == rec.SHA256
}

// ByPath is the newest record of the file at path (a path written again
// replaces its record's content, not its key, so any match is current).
func (l *Log) ByPath(path string) (Record, bool) {
	for _, r := range l.Records {
		if r.Path == path {
			return r, true
		}
	}
	return Record{}, false
}

// ByNative is the record of agent's native session nativeID: how a
// session of a store (agents.StoreLister) is known, its path being the
// store's, shared by all.
func (l *Log) ByNative(agent, nativeID string) (Record, bool) {
	for k, r := range l.Records {
		if a, _, _ := strings.Cut(k, "\x00"); a == agent && r.NativeID == nativeID && nativeID != "" {
			return r, true
		}
	}
	return Record{}, false
}

// Put notes that cast wrote path for key (cast session sessionID), with
// its digest and size now, and saves the log.
func (l *Log) Put(key, sessionID, nativeID, path string) error {
	sum, err := FileSHA256(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	for k, r := range l.Records {
		// The file holds another cast session now. A store's path (OpenCode's
		// database) holds many native sessions: the others' records stay.
		if r.Path == path && k != key && (r.NativeID == nativeID || r.NativeID == "") {
			delete(l.Records, k)
		}
	}
	if prev, ok := l.Records[key]; ok && (prev.Path != path || prev.NativeID != nativeID) {
		// The key's earlier file is still the session's: a node that has
		// not looked at it yet (down, or waiting while cast's CLI of that
		// agent runs) knows it only from here. Replaced, it was adopted as
		// a new session holding a copy of the history, and what the user
		// added to it went there (TestRestoreFromTheArchive, a Codex
		// session restored twice). Kept while the file is there.
		if !fsutil.Gone(prev.Path) {
			l.Records[earlierKey(key, prev)] = prev
		}
	}
	for k, r := range l.Records {
		if strings.HasPrefix(k, key+"\x00") && fsutil.Gone(r.Path) {
			delete(l.Records, k) // an earlier file of key, deleted since
		}
	}
	l.Records[key] = Record{NativeID: nativeID, Path: path, SHA256: sum, SessionID: sessionID, Size: fi.Size()}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WritePrivate(l.path, append(b, '\n'))
}

// earlierKey is the key an earlier file written for key keeps once key
// names a newer one: found by ByPath and ByNative, never by Unchanged
// (an export rewrites only the file it wrote last).
func earlierKey(key string, r Record) string {
	return key + "\x00" + r.NativeID + "\x00" + r.Path
}

// FileSHA256 is the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
