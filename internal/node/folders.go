package node

import (
	"os"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/validate"
)

// findFolder answers a placement: this node's path for cwd, a folder on
// the caller's machine (--map-path applied, as a migration maps it), or a
// NOT_FOUND refusal naming the path it looked at when no directory is
// there.
func (a *Daemon) findFolder(cwd string) (string, error) {
	if err := validate.Need(validate.Cwd, "cwd", cwd); err != nil {
		return "", invalidf("%v", err)
	}
	path := a.cfg.PathMap.Apply(cwd)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return path, nil
	}
	if path != cwd {
		return "", errs.New(errs.KindNotFound, errs.ReasonNotFound, "no folder %s here (--map-path of %s)", path, cwd)
	}
	return "", errs.New(errs.KindNotFound, errs.ReasonNotFound, "no folder %s here", path)
}
