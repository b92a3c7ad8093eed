package gemini

import (
	"bytes"
	"io"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

func init() { agents.Register("gemini", Driver{}, agents.FileCodec(Reader{}, Writer{})) }

// Driver runs Gemini CLI headless (agents.Driver). Gemini rewrites and
// upserts records, so its transcript is always read whole (no ParseTail).
type Driver struct{}

// StoppedExit: Gemini CLI (0.61) exits 0 on SIGTERM, SIGINT and SIGHUP
// alike (its gracefulShutdown), mid-turn too, with nothing on stdout. A
// finished turn prints its answer there; a blocked one says so on stderr,
// which the runner reads first.
func (Driver) StoppedExit(exit int, stdout, _ string) bool {
	_, text := agents.StdoutEvents(stdout)
	return exit == 0 && len(text) == 0
}

// FindSession picks the conversation file among gemini's files for an id:
// the one naming the session whose decoded history is longest (a resume
// leaves a stray header-only file with the same id prefix).
func (Driver) FindSession(home, id string) string {
	m, _ := sessionFiles(allChats(home), id)
	best, bestN := "", -1
	for _, p := range m {
		if n, ok := countMessages(p, id); ok && n > bestN {
			best, bestN = p, n
		}
	}
	return best
}

// countMessages is how many messages the file at path holds, false when
// it does not name id or does not read. The file is streamed, never held:
// a session file can be hundreds of MB, and `cast restore` looks here
// right after writing one (issue 27).
func countMessages(path, id string) (int, bool) {
	n, named := 0, false
	err := fsutil.ReadAt(path, func(f io.ReaderAt, size int64) error {
		if named = contains(f, size, []byte(id)); !named {
			return nil
		}
		return (Reader{}).ReadEach(f, size, func(transcript.Message) error {
			n++
			return nil
		})
	})
	if err != nil || !named {
		return 0, false
	}
	return n, true
}

// contains says whether r's first size bytes hold s, read a MiB at a time
// (each read runs len(s) bytes into the next, so s is found across them).
func contains(r io.ReaderAt, size int64, s []byte) bool {
	const chunk = 1 << 20
	buf := make([]byte, chunk+len(s))
	for off := int64(0); off < size; off += chunk {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if bytes.Contains(buf[:n], s) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

func (Driver) SessionID(path string) string { return agents.HeaderField(path, "sessionId") }

// Prompt escapes a prompt starting with "/" or "?", which gemini takes as
// a command, from stdin too, and drops as user text on resume (its Reader
// takes the escape off again).
func (Driver) Prompt(p string) string { return Escape(p) }

// SessionFiles: each project's chats, then the subagents' runs, which
// Gemini keeps in a folder named after the session that invoked them
// (chats/<parent session id>/<run's session id>.jsonl, header kind
// "subagent"; what the pinned 0.61 writes for invoke_agent).
func (Driver) SessionFiles(home string) []string {
	chats := filepath.Join(home, "tmp", "*", "chats")
	return []string{filepath.Join(chats, "session-*.jsonl"), filepath.Join(chats, "*", "*.jsonl")}
}
