package opencode

import (
	"fmt"
	"os"
	"time"
)

// racyWindow is how recent a write may be for the stamp to still tell:
// a file's mtime moves in the clock's coarse ticks, so a second write in
// the tick of the one a stat saw could leave the same mtime (git's "racily
// clean" entries); within the window there is no stamp and the store is
// listed.
const racyWindow = 2 * time.Second

// StoreStamp marks the state of the store under home from its files alone
// (agents.StoreLister), starting no process: a listing exports each
// session whose version moved through the CLI, ~3 CPU-seconds each.
// OpenCode keeps its database in WAL mode, so every commit writes
// opencode.db-wal, and reads do not (cast's own listing, StoreSessions,
// leaves it as it was): the mark is that file's size and mtime. The
// database file itself is left out: each run of the CLI (an export
// included) checkpoints the WAL into it, which moves its mtime every time
// and its size on the first run after a write (measured with OpenCode
// 1.18.33), so it would change with cast's own exports and tell nothing
// the WAL did not. "" when it cannot
// tell: no store (listing one starts nothing), no -wal file (not in WAL
// mode, where only the database's mtime would show a write), or the WAL
// written within racyWindow.
func (Driver) StoreStamp(home string) string {
	if _, err := os.Stat(DBPath(home)); err != nil {
		return ""
	}
	wal, err := os.Stat(DBPath(home) + "-wal")
	if err != nil {
		return ""
	}
	if time.Since(wal.ModTime()) < racyWindow {
		return ""
	}
	return fmt.Sprintf("wal %d %d", wal.Size(), wal.ModTime().UnixNano())
}
