package gemini

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
)

func init() {
	agents.Register("gemini", Driver{})
	agents.RegisterCodec("gemini", agents.Codec{Reader: Reader{}, NewWriter: agents.Fixed(Writer{})})
}

// Driver runs Gemini CLI headless (agents.Driver). Gemini rewrites and
// upserts records, so its transcript is always read whole (no ParseTail).
type Driver struct{}

func (Driver) Reader() agents.Reader { return Reader{} }

// FindSession picks the conversation file among gemini's files for an id:
// the one naming the session whose decoded history is longest (a resume
// leaves a stray header-only file with the same id prefix).
func (Driver) FindSession(home, id string) string {
	if len(id) < 8 {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(home, "tmp", "*", "chats", "session-*-"+id[:8]+".jsonl"))
	best, bestN := "", -1
	for _, p := range m {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte(id)) {
			continue
		}
		dec, err := Decode(data)
		if err != nil {
			continue
		}
		if len(dec.Messages) > bestN {
			best, bestN = p, len(dec.Messages)
		}
	}
	return best
}

func (Driver) SessionID(path string) string { return agents.HeaderField(path, "sessionId") }

// Prompt escapes a prompt starting with "/" or "?", which gemini takes as
// a command, from stdin too, and drops as user text on resume (its Reader
// takes the escape off again).
func (Driver) Prompt(p string) string { return Escape(p) }

func (Driver) Stdout([]byte) agents.Event { return agents.Event{} }

// SessionFiles: each project's chats, then the subagents' runs, which
// Gemini keeps in a folder named after the session that invoked them
// (chats/<parent session id>/<run's session id>.jsonl, header kind
// "subagent"; what the pinned 0.61 writes for invoke_agent).
func (Driver) SessionFiles(home string) []string {
	chats := filepath.Join(home, "tmp", "*", "chats")
	return []string{filepath.Join(chats, "session-*.jsonl"), filepath.Join(chats, "*", "*.jsonl")}
}
