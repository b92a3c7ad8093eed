package fsutil

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// Within reports whether path is dir or lies inside it, comparing real
// paths: symlinks are resolved in the parts of each that exist (a link
// into dir, or dir reached through a link, is caught); parts not created
// yet are taken as written.
func Within(path, dir string) (bool, error) {
	rp, err := realPath(path)
	if err != nil {
		return false, err
	}
	rd, err := realPath(dir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(rd, rp)
	if err != nil {
		return false, nil // one absolute, one not: cannot happen after Abs
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)), nil
}

// realPath is p made absolute with the symlinks of its longest existing
// prefix resolved.
func realPath(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest), nil
		}
		rest, p = filepath.Join(filepath.Base(p), rest), parent
	}
}
