package adopt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cast-dev/cast/internal/fsutil"
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
	// Written is the digest of the file as cast wrote it (a restore), once
	// taken as the baseline.
	Written string `json:"written,omitempty"`
	// Sent counts the messages kept, by digest (occurrences).
	Sent map[string]int `json:"sent,omitempty"`
}

// states is the follower's bookkeeping by path, saved after each change
// so a restarted node sends nothing twice (and the client ids make a
// resend after a crash harmless).
type states struct {
	path  string
	mu    sync.Mutex
	Files map[string]*fileState `json:"files"`
}

func loadStates(path string) (*states, error) {
	s := &states{path: path, Files: map[string]*fileState{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it: adoption reads every native session again, storing nothing twice)", path, err)
	}
	if s.Files == nil {
		s.Files = map[string]*fileState{}
	}
	return s, nil
}

func (s *states) get(path string) *fileState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Files[path]
}

func (s *states) put(path string, st *fileState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Files[path] = st
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(s.path, b, 0o600)
}

// digestOf is the digest a client id was made from (clientID).
func digestOf(cid string) string {
	d := strings.TrimPrefix(cid, ClientIDPrefix)
	if i := strings.LastIndexByte(d, '.'); i >= 0 {
		d = d[:i]
	}
	return d
}
