package adopt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/ids"
)

// fileState is what the follower knows of one native file.
type fileState struct {
	Agent     string `json:"agent"`
	NativeID  string `json:"native_id,omitempty"`
	SessionID string `json:"session_id,omitempty"` // the cast session keeping it
	// Size bytes (whole lines) were read; Hash is their SHA-256: a file
	// still starting with them grew, any other was rewritten.
	Size    int64  `json:"size"`
	Hash    string `json:"hash,omitempty"`
	ModTime int64  `json:"mod_time,omitempty"` // unchanged size and time: not read again
	// Torn is how many bytes followed Size when it was read: a last line
	// not ended yet. The file's size then was Size+Torn, so a file left
	// ending in a torn line (a CLI killed mid-write) is not read again
	// until it changes.
	Torn int64 `json:"torn,omitempty"`
	// Version is a stored session's (agents.StoredSession) when last read.
	Version string `json:"version,omitempty"`
	// Written is the digest of the file as cast wrote it (a restore), once
	// taken as the baseline.
	Written string `json:"written,omitempty"`
	// Newest is the time (Unix ns) of the newest message of the Size bytes
	// read, where the format gives times: a file read again whose every
	// message is newer (an append by the agent's CLI after the file was
	// deleted makes it anew with only what came after) holds nothing kept
	// (beginsAgain).
	Newest int64 `json:"newest,omitempty"`
	// Sent counts the messages kept, by digest (occurrences).
	Sent map[string]int `json:"sent,omitempty"`
	// Base is Sent as of Size while what the file grew by is being sent
	// (nil otherwise): the tail's occurrences count from it, so a send
	// begun again after a failure gives what it kept the same client ids.
	// Saved as null when nil: an empty Base (nothing was kept before the
	// tail) read back as nil would make the next tail count from Sent,
	// and what the interrupted send kept was sent again under new ids.
	Base map[string]int `json:"base"`
}

// states is the follower's bookkeeping, one file per native file in dir
// (saved after each change, so a restarted node sends nothing twice, and
// a change costs the writing of that file's state only; the client ids
// make a resend after a crash harmless).
type states struct {
	dir   string
	mu    sync.Mutex
	files map[string]*fileState // by native file
}

// stateFile is what one state file holds.
type stateFile struct {
	Path  string     `json:"path"`
	State *fileState `json:"state"`
}

// snapshotDir is the folder, inside the follower's own, of the private
// copies it reads native files through: on the node's disk, not in the
// system temp folder, which is often tmpfs (memory, on a laptop), where
// a copy of a 400 MB Gemini file would cost what holding it does.
const snapshotDir = "snapshots"

func loadStates(dir string) (*states, error) {
	s := &states{dir: dir, files: map[string]*fileState{}}
	// A copy still there is a crashed node's: nothing reads it any more.
	if err := os.RemoveAll(filepath.Join(dir, snapshotDir)); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var f stateFile
		if err := json.Unmarshal(b, &f); err != nil || f.State == nil {
			// Read again from scratch: nothing is stored twice (client ids).
			continue
		}
		if f.State.Sent == nil { // none kept yet: saved without the field
			f.State.Sent = map[string]int{}
		}
		s.files[f.Path] = f.State
	}
	return s, nil
}

func (s *states) get(path string) *fileState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[path]
}

func (s *states) put(path string, st *fileState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = st
	b, err := json.Marshal(stateFile{Path: path, State: st})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(s.file(path), b, 0o600)
}

// file is where path's state is saved.
func (s *states) file(path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:12])+".json")
}

// keys are the native sessions of agent the state keeps.
func (s *states) keys(agent string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, st := range s.files {
		if st.Agent == agent {
			out = append(out, k)
		}
	}
	return out
}

// drop forgets path, in memory and on disk.
func (s *states) drop(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, path)
	err := os.Remove(s.file(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// tempFile makes a private file for a copy of a native file (pattern as
// os.CreateTemp's) in the snapshot folder; its user removes it.
func (s *states) tempFile(pattern string) (*os.File, error) {
	dir := filepath.Join(s.dir, snapshotDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, pattern)
}

// digestOf is the digest a client id was made from (clientID).
func digestOf(cid string) string {
	d := strings.TrimPrefix(cid, ids.AdoptedPrefix)
	if i := strings.LastIndexByte(d, '.'); i >= 0 {
		d = d[:i]
	}
	return d
}
