package pi

import (
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

func init() { agents.Register("pi", Driver{}, agents.FileCodec(Reader{}, Writer{})) }

// Driver runs pi headless (agents.Driver).
type Driver struct{}

func (Driver) FindSession(home, id string) string {
	if id == "" {
		return ""
	}
	if p := agents.NewestMatch(filepath.Join(home, "sessions", "*", "*_"+id+".jsonl")); p != "" {
		return p
	}
	m, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "*.jsonl"))
	for _, p := range m {
		if agents.HeaderField(p, "id") == id {
			return p
		}
	}
	return ""
}

// SessionID: pi puts its own id in the header.
func (Driver) SessionID(path string) string {
	if agents.HeaderField(path, "type") != "session" {
		// No header: a file pi began again by appending after it was
		// deleted, whose first line is an entry (its id names no session).
		return ""
	}
	return agents.HeaderField(path, "id")
}

// ParseTail parses appended entries; the chain stops at the old leaf.
func (Driver) ParseTail(b []byte, _ int) ([]transcript.Message, error) {
	dec, err := Decode(b)
	return dec.Messages, err
}

// NewSessionPath names a new session's file the way pi names its own, in
// pi's folder for cwd: `pi --session F` starts a new session in F when F
// does not exist.
func (Driver) NewSessionPath(home, cwd string) string {
	return filepath.Join(SessionDir(home, cwd), fileStamp(time.Now())+"_"+uuid.NewString()+".jsonl")
}

// CwdFolders: pi keeps a sessions folder per cwd.
func (Driver) CwdFolders(home, cwd string) []string { return []string{SessionDir(home, cwd)} }

// SessionFiles: one folder per working directory.
func (Driver) SessionFiles(home string) []string {
	return []string{filepath.Join(home, "sessions", "*", "*.jsonl")}
}
