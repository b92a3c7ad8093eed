package fence

import castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"

// MigrationRecord is a migration read at one revision, with each session
// record's ModRevision for compare-and-swap.
type MigrationRecord struct {
	M         *castv1.Migration // sessions filled in, in id order
	Rev       int64             // ModRevision of the header
	SessRevs  map[string]int64  // session id -> ModRevision of its record
	ReadAtRev int64
}

// Handover is the commit of one session's migration.
type Handover struct {
	MigID   string
	MS      *castv1.MigrationSession
	MSRev   int64
	Target  string
	DestCwd string          // "" keeps the session's cwd
	Notice  *castv1.Message // appended in the same txn; needs a ClientID
}

// Work tree record names under worktrees/{m}/{s}/.
const (
	WorkTreeManifest    = "manifest"     // the bundle's manifest (JSON), written after its chunks
	WorkTreeExportError = "export_error" // why the source could not export
	WorkTreeImport      = "import"       // the destination's outcome (JSON)
)
