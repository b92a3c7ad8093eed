package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fsutil"
)

// exportRecord is a native session `cast export` wrote: its id, its file
// and the file's digest as cast left it. cast rewrites that session on a
// later export only while the file is still byte-identical (or the user
// passes --overwrite); anything else gets a new native session, so what
// the user did in it since is never lost.
type exportRecord struct {
	NativeID string `json:"native_id"`
	Path     string `json:"path"`
	SHA256   string `json:"sha256"`
}

// exportLog is what cast exported, kept beside its contexts file
// (exports.json), keyed by agent, agent folder and cast session.
type exportLog struct {
	path    string
	Records map[string]exportRecord `json:"exports"`
}

func exportKey(agent, home, sessionID string) string {
	return agent + "\x00" + home + "\x00" + sessionID
}

func loadExportLog() (*exportLog, error) {
	l := &exportLog{path: filepath.Join(filepath.Dir(client.ConfigPath(os.Getenv)), "exports.json"), Records: map[string]exportRecord{}}
	b, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, l); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it and cast export writes new native sessions)", l.path, err)
	}
	if l.Records == nil {
		l.Records = map[string]exportRecord{}
	}
	return l, nil
}

// unchanged is the record of key when its file is still what cast wrote.
func (l *exportLog) unchanged(key string) (exportRecord, bool) {
	rec, ok := l.Records[key]
	if !ok || rec.NativeID == "" {
		return rec, false
	}
	sum, err := fileSHA256(rec.Path)
	return rec, err == nil && sum == rec.SHA256
}

// record notes that cast wrote rec.Path for key, with its digest now.
func (l *exportLog) record(key, nativeID, path string) error {
	sum, err := fileSHA256(path)
	if err != nil {
		return err
	}
	l.Records[key] = exportRecord{NativeID: nativeID, Path: path, SHA256: sum}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(l.path, append(b, '\n'), 0o600)
}

func fileSHA256(path string) (string, error) {
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
