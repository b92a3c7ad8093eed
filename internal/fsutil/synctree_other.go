//go:build !linux

package fsutil

import (
	"io/fs"
	"path/filepath"
)

// syncPath is how SyncTree makes one file or directory durable (SyncDir
// opens and syncs either); a test records the order of its calls through it.
var syncPath = SyncDir

// syncTree, without syncfs(2), syncs every regular file, then every
// directory after what it holds, root last, and then root's parent.
// Symlinks and other special files are not opened (a symlink's own entry
// is made durable by its directory's sync).
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			return syncPath(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Walked parents first, so backwards is children first: a directory
	// is synced after everything below it.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncPath(dirs[i]); err != nil {
			return err
		}
	}
	return syncPath(filepath.Dir(filepath.Clean(root)))
}
