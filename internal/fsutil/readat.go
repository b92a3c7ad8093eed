package fsutil

import (
	"io"
	"os"
)

// ReadAt opens the file at path and calls read with it and its size, for
// a reader that walks a file by offset instead of holding it (a session
// file can be hundreds of MB). The file is closed when read returns; an
// error opening or statting it is returned as it is.
func ReadAt(path string, read func(r io.ReaderAt, size int64) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return read(f, fi.Size())
}
