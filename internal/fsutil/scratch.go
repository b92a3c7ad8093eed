package fsutil

import (
	"errors"
	"os"
)

// Scratch is a private temporary file whose name is removed as soon as it
// is made: what is written to it lives until it is closed, so a process
// killed while it holds one (or while a child writes to it) leaves nothing
// behind. Where a system cannot remove an open file's name (Windows), the
// name stays until Close.
type Scratch struct {
	*os.File
	named bool // the name is still there for Close to remove
}

// NewScratch makes an empty Scratch in dir (os.TempDir when ""), mode
// 0600; pattern is os.CreateTemp's. Pass s.File, not s, where a child
// process is to write to it directly.
func NewScratch(dir, pattern string) (*Scratch, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &Scratch{File: f, named: os.Remove(f.Name()) != nil}, nil
}

// Close closes the file, and removes its name if it is still there.
func (s *Scratch) Close() error {
	err := s.File.Close()
	if s.named {
		err = errors.Join(err, os.Remove(s.Name()))
	}
	return err
}
