package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/fsutil"
)

// SessionRemover is a Driver whose sessions are not one file each: it
// removes session id from the agent's store itself (OpenCode deletes it
// through its CLI). t.Home is the agent's own folder.
type SessionRemover interface {
	RemoveSession(ctx context.Context, bin string, env []string, t Target, id string) error
}

// CwdFolders is a Driver whose CLI keeps folders per working directory
// under its own folder home (Claude's projects/<cwd>, pi's
// sessions/--cwd--), made even by a run that wrote no session.
type CwdFolders interface {
	CwdFolders(home, cwd string) []string
}

// RemoveScratch removes what one run of a's CLI in the scratch folder
// t.Cwd left in its own folder t.Home: the native session id (at path),
// every session its store keeps of that folder (StoreLister), the CLI's
// index entry for that cwd (CwdIndex) and its folders for it, which
// nobody else uses (a readiness probe leaves nothing in the user's
// history).
func (a Agent) RemoveScratch(ctx context.Context, bin string, env []string, t Target, id, path string) error {
	if id != "" || path != "" {
		if err := a.RemoveSession(ctx, bin, env, t, id, path); err != nil {
			return err
		}
	}
	d, _ := a.Driver()
	if sl, ok := d.(StoreLister); ok {
		// A run stopped before its CLI said its session's id (a probe
		// whose model never answered: OpenCode prints the id with the
		// first part) still made one, which the user's history and the
		// node's adoption would list: found by its folder, the scratch
		// folder no other run uses.
		list, err := sl.StoredSessions(ctx, bin, env, t.Home)
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.Cwd == "" || s.ID == id {
				continue
			}
			if in, _ := fsutil.Within(s.Cwd, t.Cwd); in {
				if err := a.RemoveSession(ctx, bin, env, t, s.ID, ""); err != nil {
					return err
				}
			}
		}
	}
	if ix, ok := d.(CwdIndex); ok {
		if err := ix.ForgetCwd(t.Home, t.Cwd); err != nil {
			return err
		}
	}
	f, ok := d.(CwdFolders)
	if !ok {
		return nil
	}
	for _, dir := range f.CwdFolders(t.Home, t.Cwd) {
		if err := under(t.Home, dir); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// RemoveSession removes the native session id (its transcript at path,
// when known) that a run of a's CLI made in the agent's own folder t.Home,
// so that it never shows in the user's history (a readiness probe's
// session): the driver's own way when it has one (SessionRemover), else
// the transcript file and the folders it leaves empty, up to t.Home.
func (a Agent) RemoveSession(ctx context.Context, bin string, env []string, t Target, id, path string) error {
	d, ok := a.Driver()
	if !ok {
		return fmt.Errorf("%s: no driver to remove its session", a.Name)
	}
	if r, ok := d.(SessionRemover); ok {
		return r.RemoveSession(ctx, bin, env, t, id)
	}
	if _, ok := d.(StoreDriver); ok {
		return fmt.Errorf("%s: its sessions live in a store cast cannot remove one from", a.Name)
	}
	if path == "" && id != "" {
		path = d.FindSession(t.Home, id)
	}
	if path == "" {
		return nil // the CLI wrote none
	}
	return removeUnder(t.Home, path)
}

// removeUnder removes path, which must lie under home, and then each
// parent folder it left empty, stopping at home.
func removeUnder(home, path string) error {
	home, path = filepath.Clean(home), filepath.Clean(path)
	if err := under(home, path); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for dir := filepath.Dir(path); dir != home && strings.HasPrefix(dir, home+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty (or gone): what is left is not the probe's alone
			break
		}
	}
	return nil
}

// under refuses a path that is not inside the agent's folder home.
func under(home, path string) error {
	rel, err := filepath.Rel(filepath.Clean(home), filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is not under the agent's folder %s", path, home)
	}
	return nil
}
