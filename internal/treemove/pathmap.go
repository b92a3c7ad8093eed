package treemove

import (
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/git"
)

// Mapping says that checkouts under From on the source machine live under
// To on this one.
type Mapping struct{ From, To string }

// PathMap maps a checkout path on another machine to the path on this
// one, since home directories and checkout roots differ between machines.
// The longest From that is the path or one of its parent directories
// wins; a path no From matches stays as it is.
type PathMap []Mapping

// ParsePathMap reads "FROM=TO" specs (split at the first "="). Both sides
// must be absolute; they are cleaned, so "/home/a/" equals "/home/a".
func ParsePathMap(specs []string) (PathMap, error) {
	var p PathMap
	seen := map[string]bool{}
	for _, s := range specs {
		from, to, ok := strings.Cut(s, "=")
		bad := func(msg string) error {
			return &git.Error{Scope: scope, Kind: git.KindInvalid, Path: s, Msg: "path map entry " + msg + "; write FROM=TO with two absolute paths, e.g. /home/alice/src=/srv/src"}
		}
		switch {
		case !ok:
			return nil, bad("has no \"=\"")
		case !filepath.IsAbs(from):
			return nil, bad("has a FROM that is not an absolute path")
		case !filepath.IsAbs(to):
			return nil, bad("has a TO that is not an absolute path")
		}
		from, to = filepath.Clean(from), filepath.Clean(to)
		if seen[from] {
			return nil, bad("maps " + from + " a second time")
		}
		seen[from] = true
		p = append(p, Mapping{From: from, To: to})
	}
	return p, nil
}

// Apply maps path; matching is on whole path components, so /src maps
// /src/x but not /srcfoo.
func (p PathMap) Apply(path string) string {
	if !filepath.IsAbs(path) {
		return path
	}
	clean := filepath.Clean(path)
	// Searched in full rather than sorted once, so a PathMap built by
	// hand works the same.
	best := -1
	for i, m := range p {
		if under(clean, m.From) && (best < 0 || len(m.From) > len(p[best].From)) {
			best = i
		}
	}
	if best < 0 {
		return path
	}
	rest := strings.TrimPrefix(clean, p[best].From)
	return filepath.Join(p[best].To, rest)
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	if dir == string(filepath.Separator) || path == dir {
		return true
	}
	return strings.HasPrefix(path, dir) && path[len(dir)] == filepath.Separator
}
