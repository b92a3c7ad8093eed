package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/treemove"
)

// A migration started with --clean-source leaves the source's checkout
// clean once the session has moved. The source learns that from the
// ReleaseSession it gets after the commit, so the export leaves a note of
// what it sent and where to; a rolled-back migration never releases the
// session, and its re-assignment (no longer fenced by it) drops the note.

// exportNote is what the export sent, kept until the release.
type exportNote struct {
	Migration string            `json:"migration"`
	Target    string            `json:"target"`
	Cwd       string            `json:"cwd"`
	Manifest  treemove.Manifest `json:"manifest"`
}

func (a *Daemon) exportNotePath(sessionID string) string {
	return filepath.Join(a.migrationDir(), sessionID+".clean.json")
}

// noteExport keeps (or, without clean_source, drops) the note for c.
func (a *Daemon) noteExport(c *castv1.ExportWorkTree, man treemove.Manifest) error {
	path := a.exportNotePath(c.SessionId)
	if !c.CleanSource {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(exportNote{Migration: c.MigrationId, Target: c.TargetNode, Cwd: c.Cwd, Manifest: man})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// dropStaleNote drops the export note of a session assigned here while
// not fenced by the note's migration: that migration rolled back (its
// refresh re-assigns the session), so no release of it follows, and a later
// move that did not ask for a clean source (one that skips the work tree
// exports nothing to replace the note) must not find it at its release.
func (a *Daemon) dropStaleNote(s *castv1.Session) {
	path := a.exportNotePath(s.Id)
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var n exportNote
	if json.Unmarshal(b, &n) == nil && n.Migration == s.FencedBy {
		return // its migration still moves the session
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.lg.Warn("drop clean-source note of a rolled-back migration failed", zap.String("session", s.Id), zap.Error(err))
	}
}

// cleanMoved stashes the checkout of a session that moved to owner, when
// its export asked for it; a checkout changed since is left alone.
func (a *Daemon) cleanMoved(ctx context.Context, sessionID, owner string) {
	if !a.migrations.start("clean/" + sessionID) { // a second release while one cleans
		return
	}
	defer a.migrations.done("clean/" + sessionID)
	path := a.exportNotePath(sessionID)
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	defer os.Remove(path)
	var n exportNote
	if err := json.Unmarshal(b, &n); err != nil || n.Target != owner {
		return
	}
	lg := a.lg.With(zap.String("session", sessionID), zap.String("migration", n.Migration), zap.String("cwd", n.Cwd))
	stashed, err := treemove.Clean(ctx, n.Cwd, n.Manifest, "cast: moved to "+owner+" by migration "+n.Migration)
	switch {
	case err != nil:
		lg.Warn("source checkout not cleaned after the move", zap.Error(err))
	case stashed:
		lg.Info("source checkout cleaned after the move: its changes are in a stash entry", zap.String("owner", owner))
	}
}
