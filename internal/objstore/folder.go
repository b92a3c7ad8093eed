package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/fsutil"
)

// Folder keeps objects as files under a directory: a key's slashes are
// its subfolders. Writes are atomic (a temp file renamed into place), so a
// crash leaves an object whole or absent.
type Folder struct {
	dir string
}

// NewFolder returns the folder store at dir, creating it (0700).
func NewFolder(dir string) (*Folder, error) {
	if dir == "" {
		return nil, fmt.Errorf("objstore: folder path is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("objstore: create folder: %w", err)
	}
	return &Folder{dir: dir}, nil
}

func (f *Folder) path(key string) (string, error) {
	clean := filepath.ToSlash(filepath.Clean("/" + key))[1:]
	if clean != key || key == "" || strings.HasPrefix(key, ".") {
		return "", fmt.Errorf("objstore: bad key %q", key)
	}
	return filepath.Join(f.dir, filepath.FromSlash(key)), nil
}

// Put stores data under key, replacing what was there.
func (f *Folder) Put(_ context.Context, key string, data []byte) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	return fsutil.WriteFileAtomic(p, data, 0o600)
}

// Get reads the object at key (ErrNotFound when there is none).
func (f *Folder) Get(_ context.Context, key string) ([]byte, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return b, err
}

// Delete removes key; a missing key is not an error.
func (f *Folder) Delete(_ context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List calls fn with every object whose key starts with prefix, in key
// order. Other hidden files are not objects, but a write's temp file is
// listed under its own key with its time: one a crash left is otherwise
// never deleted (up to a segment's size a crash, for ever), and a sweep
// of what is older than any write could still run deletes it (a write in
// flight's is younger; were it deleted, its rename would fail, not tear).
func (f *Folder) List(_ context.Context, prefix string, fn func(key string, modified time.Time) error) error {
	return filepath.WalkDir(f.dir, func(p string, d fs.DirEntry, err error) error {
		// An object or folder deleted since its parent was read (a
		// concurrent delete, a purge) is skipped, not the end of the
		// walk: the rest is still listed. A missing root lists nothing.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(f.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) || (strings.HasPrefix(d.Name(), ".") && !fsutil.IsAtomicTemp(d.Name())) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since its folder was read
		}
		if err != nil {
			return err
		}
		return fn(key, info.ModTime())
	})
}
