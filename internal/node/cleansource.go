package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fsutil"
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
	// Stored: the control plane stored this upload. It keeps the first
	// upload of a migration's export, so a resent export answers with
	// this note instead of bundling the checkout again.
	Stored bool `json:"stored,omitempty"`
}

func (a *Daemon) exportNotePath(sessionID string) string {
	return filepath.Join(a.migrationDir(), sessionID+".clean.json")
}

// readNote reads the note at path (false when there is none, or it does
// not parse: a write cut short, which cleans nothing).
func readNote(path string) (exportNote, bool) {
	var n exportNote
	b, err := os.ReadFile(path)
	if err != nil {
		return n, false
	}
	return n, json.Unmarshal(b, &n) == nil
}

// noteExport keeps (or, without clean_source, drops) the note for c. It
// is written before the upload: the release that reads it can only follow
// a stored upload.
func (a *Daemon) noteExport(c *castv1.ExportWorkTree, man treemove.Manifest) error {
	a.migrations.notes.Lock()
	defer a.migrations.notes.Unlock()
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
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

// exportStored says whether c's export was uploaded and stored already
// (only a --clean-source export leaves a note saying so; any other resent
// export is bundled again, and its upload ignored by the control plane).
func (a *Daemon) exportStored(c *castv1.ExportWorkTree) bool {
	if !c.CleanSource {
		return false
	}
	a.migrations.notes.Lock()
	defer a.migrations.notes.Unlock()
	n, ok := readNote(a.exportNotePath(c.SessionId))
	return ok && n.Migration == c.MigrationId && n.Stored
}

// noteStored marks c's note stored once its upload is. An upload the
// control plane did not store (size 0: it kept an earlier upload of this
// export, whose answer this node lost) leaves no telling which checkout
// state moved, so the note goes and the source keeps its changes. Size 0
// means only that: a stored upload is never empty, since a git bundle,
// even of an empty checkout, holds its header, refs and commit
// (TestEmptyCheckoutsExportIsStored).
func (a *Daemon) noteStored(c *castv1.ExportWorkTree, size int64) error {
	if !c.CleanSource {
		return nil
	}
	a.migrations.notes.Lock()
	defer a.migrations.notes.Unlock()
	path := a.exportNotePath(c.SessionId)
	n, ok := readNote(path)
	if !ok || n.Migration != c.MigrationId {
		return nil // the release read it already
	}
	if size == 0 {
		a.lg.Warn("the control plane kept an earlier upload of this export; the source checkout will not be cleaned",
			zap.String("migration", c.MigrationId), zap.String("session", c.SessionId))
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	n.Stored = true
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

// dropStaleNote drops the export note of a session assigned here while
// not fenced by the note's migration: that migration rolled back (its
// refresh re-assigns the session), so no release of it follows, and a later
// move that did not ask for a clean source (one that skips the work tree
// exports nothing to replace the note) must not find it at its release.
func (a *Daemon) dropStaleNote(s *castv1.Session) {
	a.migrations.notes.Lock()
	defer a.migrations.notes.Unlock()
	path := a.exportNotePath(s.Id)
	if _, err := os.Stat(path); err != nil {
		return
	}
	if n, ok := readNote(path); ok && n.Migration == s.FencedBy {
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
	a.migrations.notes.Lock()
	_, err := os.Stat(path)
	n, ok := readNote(path)
	a.migrations.notes.Unlock()
	if err != nil {
		return
	}
	defer os.Remove(path)
	if !ok || n.Target != owner {
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
