package fsutil

import "os"

// ScratchFile returns a new, empty file in the temporary folder whose name
// is already gone: what is written to it lives until the last descriptor
// is closed, so a process killed while it holds one (or a child writing to
// it) leaves nothing behind in the folder. pattern is os.CreateTemp's.
// cast's nodes and CLI run on Linux and macOS, where an open file outlives
// its name.
func ScratchFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
