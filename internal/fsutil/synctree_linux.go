package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// syncFS writes back everything of the filesystem path is on; a test
// records its calls through it.
var syncFS = func(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// syncTree syncs each filesystem the tree (and root's parent) lies on
// with one syncfs(2), which writes back all its files and directories and
// reports a writeback error (Linux 5.8 on). An fsync of each file cost
// about 2 ms apiece just after git wrote them: 10 s for 5,000 files, where
// syncfs took 0.2 s. The walk only looks at directories, for the mounts
// inside the tree.
func syncTree(root string) error {
	root = filepath.Clean(root)
	devs := map[uint64]string{}
	note := func(p string, fi fs.FileInfo) {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if _, seen := devs[uint64(st.Dev)]; !seen {
				devs[uint64(st.Dev)] = p
			}
		}
	}
	parent := filepath.Dir(root)
	fi, err := os.Stat(parent)
	if err != nil {
		return err
	}
	note(parent, fi)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		note(p, fi)
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range devs {
		if err := syncFS(p); err != nil {
			return err
		}
	}
	return nil
}
