package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A resync assigns every session a node owns, and each assignment dropped
// its sessions' import done markers by reading the whole migration folder:
// a node owning thousands of sessions read it thousands of times. The
// folder is read once; the markers are dropped as before (an import's
// marker once its migration no longer fences the session, also one
// written after the folder was read), and a marker of the migration that
// still fences the session stays.
func TestResyncReadsTheMigrationFolderOnce(t *testing.T) {
	dir := t.TempDir()
	a, stop := resyncDaemon(t, dir)
	defer stop()
	a.cfg.DataDir = dir
	reads := 0
	a.markers.readDir = func(d string) ([]os.DirEntry, error) { reads++; return os.ReadDir(d) }
	if err := os.MkdirAll(a.migrationDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := func(migration, session string) string {
		return filepath.Join(a.migrationDir(), migration+importedSuffix(session))
	}
	for _, m := range []string{marker("m1", "s-000001"), marker("m2", "s-000002")} {
		if err := os.WriteFile(m, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const n = 50
	cmds := make([]*castv1.Command, n)
	for i := range cmds {
		s := &castv1.Session{Id: fmt.Sprintf("s-%06d", i), Agent: "claude", Cwd: "/src/project", State: castv1.SessionState_SESSION_STATE_IDLE}
		if i == 2 {
			s.FencedBy = "m2" // its migration still runs: its marker answers a resent import
		}
		cmds[i] = &castv1.Command{Kind: &castv1.Command_AssignSession{AssignSession: &castv1.AssignSession{OwnerToken: 7, Session: s}}}
	}
	handleAll(t, a, cmds[:10])
	// An import that ends after the folder was read.
	if err := a.writeImportMarker(marker("m3", "s-000030"), "/src/project"); err != nil {
		t.Fatal(err)
	}
	handleAll(t, a, cmds[10:])
	if reads != 1 {
		t.Fatalf("%d assignments read the migration folder %d times, want once", n, reads)
	}
	for _, tc := range []struct {
		path string
		kept bool
	}{{marker("m1", "s-000001"), false}, {marker("m2", "s-000002"), true}, {marker("m3", "s-000030"), false}} {
		if _, err := os.Stat(tc.path); (err == nil) != tc.kept {
			t.Errorf("%s: kept %v, want %v", filepath.Base(tc.path), err == nil, tc.kept)
		}
	}
}
