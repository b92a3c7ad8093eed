// Package fsutil writes files the way cast's state, credential and native
// transcript files must be written: atomically (a unique temp sibling,
// fsync, rename, fsync dir) and private; and guards the paths around them:
// a daemon's exclusive lock on its data dir (LockDir) and whether a path
// lies inside a folder, symlinks resolved (Within); and makes temporary
// files that leave nothing behind a killed process (Scratch).
package fsutil

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteFileAtomic replaces path with data, mode perm, so a crash leaves
// either the old or the new file, never a torn one.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic replaces path with what write writes (buffered), mode perm.
// The temp file's name is unique, so two writers of one path never share
// it, and it is hidden and ends in neither the file's own extension nor a
// fixed suffix, so a CLI globbing its folder never picks it up.
func WriteAtomic(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempMark+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := fill(f, perm, write); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes the entries just made in dir (a rename, a link) durable:
// without it a crash can lose a file whose own bytes were synced.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// tempMark follows the target's name in WriteAtomic's temp file's.
const tempMark = ".tmp"

// IsAtomicTemp says whether name (a base name) is a WriteAtomic temp
// file's: one a crash before its rename left behind, unless a write is
// still running.
func IsAtomicTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMark)
}

// fill writes f through a buffer and syncs it.
func fill(f *os.File, perm os.FileMode, write func(io.Writer) error) error {
	if err := f.Chmod(perm); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Sync()
}

// WritePrivate writes a file of cast's own (0600, atomically), making its
// folder (0700).
func WritePrivate(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return WriteFileAtomic(path, data, 0o600)
}
