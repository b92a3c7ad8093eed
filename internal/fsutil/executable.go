package fsutil

import "os"

// Executable says whether path (links followed) is a file someone may
// run: not a folder, with an execute bit. The node's readiness and the
// runner's lookup of an agent's CLI ask it alike.
func Executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}
