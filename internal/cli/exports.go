package cli

import (
	"os"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/exportlog"
)

// loadExportLog is the record of what cast exported, kept beside the
// contexts file (exports.json): cast rewrites a native session on a later
// export only while the file is still byte-identical (or the user passes
// --overwrite); anything else gets a new native session, so what the user
// did in it since is never lost. A node's adoption reads it too.
func loadExportLog() (*exportlog.Log, error) {
	return exportlog.Load(client.BesideConfig(os.Getenv, exportlog.FileName))
}
