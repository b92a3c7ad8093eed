package fsutil

import (
	"errors"
	"io/fs"
	"os"
)

// Gone says whether path is not there at all (not merely unreadable).
func Gone(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist)
}
