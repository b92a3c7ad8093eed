package agents

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

// Driver is how cast runs one agent's CLI headless and follows what a turn
// does, beyond the registry's data (command templates, folders, logins).
// Each agent package the runner drives implements it and registers it
// (Register) when it is linked; the runner, node and CLI ask the driver
// and never branch on an agent's name.
type Driver interface {
	// FindSession is the native transcript of session id under home, the
	// agent's own folder ("" when there is none).
	FindSession(home, id string) string
	// SessionID is the native id the transcript at path belongs to (""
	// when it does not say).
	SessionID(path string) string
}

// PromptEscaper is a Driver whose CLI takes some prompts as its own
// command syntax (Gemini's "/" and "?"): Prompt is the prompt as the CLI
// must get it. Other CLIs get the prompt as it is.
type PromptEscaper interface {
	Prompt(prompt string) string
}

// StdoutReader is a Driver whose CLI says something on its headless
// stdout (a session id, an error, a usage window, streamed output):
// Stdout reads one JSON line of it. Other CLIs' stdout is not read.
type StdoutReader interface {
	Stdout(line []byte) Event
}

// Event is what one line of an agent's headless stdout says.
type Event struct {
	SessionID string               // the native id of the session the CLI made
	Err       string               // an error the CLI reported
	Messages  []transcript.Message // output streamed on stdout (store-backed agents)
	Limit     *quota.Window        // a usage window the provider reported
}

// TailParser is a Driver whose transcript is append-only during a turn:
// the runner parses only what the turn appended. linesBefore counts the
// non-blank lines before b, for formats whose NativeIDs are positions.
type TailParser interface {
	ParseTail(b []byte, linesBefore int) ([]transcript.Message, error)
}

// SessionNamer is a Driver whose CLI takes the file of a new session from
// cast (pi's --session F makes F): a fresh turn runs the Resume form on the
// path NewSessionPath picks, so parallel fresh turns in one cwd never mix.
type SessionNamer interface {
	NewSessionPath(home, cwd string) string
}

// StoreDriver is a Driver whose sessions live in a store of the agent's
// own rather than one file each (OpenCode's SQLite): a turn's output comes
// from stdout (Event.Messages), and a whole session is read with Export
// (from the store itself, or through the agent's CLI: bin, env).
type StoreDriver interface {
	StorePath(home string) string
	Export(ctx context.Context, bin string, env []string, t Target, id string) ([]transcript.Message, error)
}

// LargePrompter is a Driver that gets a prompt longer than one turn takes
// (Commands.MaxPromptChars) to the model whole another way: DeliverLarge
// adds the prompt to the session's history (starting one when id and path
// are empty), and the turn then resumes that session with LargeTurn, a
// short pointer to it. env is the turn's environment.
type LargePrompter interface {
	DeliverLarge(ctx context.Context, bin string, env []string, cwd, id, path, prompt string) (Delivered, error)
	LargeTurn(prompt string) string
	// LargeHow says, for a dry run, how the prompt goes in with the CLI bin.
	LargeHow(bin string) string
}

// Ephemeral is a Driver whose CLI can run a turn that keeps no session
// anywhere (Codex's --ephemeral: no rollout and no row in its thread
// index): a readiness probe adds these arguments.
type Ephemeral interface {
	EphemeralArgs() []string
}

// Delivered is the session a LargePrompter put a prompt in.
type Delivered struct{ ID, Path string }

// StopExiter is a Driver whose CLI catches a stop signal from outside
// (SIGTERM, SIGINT: a user's kill or Ctrl-C, a service manager's stop)
// mid-turn and exits with a status of its own rather than dying of it or
// exiting 128+n, so its exit alone reads as a finished turn (exit 0) or
// as the CLI's own failure. StoppedExit says whether the CLI's exit
// status and what it printed (stdout's tail, stderr) are that exit. The
// runner asks only for a turn that left no answer (its last row is not
// the model's text) and printed no failure it knows (refusal, login, rate
// limit).
type StopExiter interface {
	StoppedExit(exit int, stdout, stderr string) bool
}

// StdoutEvents reads a CLI's headless stdout for a StopExiter: how many
// JSON lines had each "type" (and each "type/subtype"), and the other
// lines that held text (a text-mode CLI's answer or message).
func StdoutEvents(stdout string) (types map[string]int, text []string) {
	types = map[string]int{}
	for _, line := range strings.Split(stdout, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Subtype string `json:"subtype"`
		}
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
			text = append(text, line)
			continue
		}
		types[ev.Type]++
		if ev.Subtype != "" {
			types[ev.Type+"/"+ev.Subtype]++
		}
	}
	return types, text
}

// TranscriptUsage is a Driver whose transcript records the provider's
// usage windows (Codex's rate_limits); others report them on stdout.
type TranscriptUsage interface {
	Usage(path string) []quota.Window
}

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes d the driver and c the codec of the registered agent
// name (a driven agent's transcript is read with its codec's Reader);
// agent packages call it from init. It panics on an unknown name or a
// second driver or codec.
func Register(name string, d Driver, c Codec) {
	register(drivers, "driver", name, d)
	RegisterCodec(name, c)
}

// register adds v to m under the registered agent name, once.
func register[T any](m map[string]T, kind, name string, v T) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, ok := registry[name]; !ok {
		panic("agents: " + kind + " of unknown agent " + name)
	}
	if _, dup := m[name]; dup {
		panic("agents: second " + kind + " for " + name)
	}
	m[name] = v
}

// Driver is a's driver; false when the runner cannot drive a here (its
// CLI is not installable, or its package is not linked).
func (a Agent) Driver() (Driver, bool) {
	driversMu.RLock()
	defer driversMu.RUnlock()
	d, ok := drivers[a.Name]
	return d, ok
}

// DriverAs is agent's driver as T, one of the optional interfaces a
// driver may implement (SessionLister, StoreLister, TailParser, ...);
// false when the agent is unknown, has no driver here, or its driver is
// no T.
func DriverAs[T any](agent string) (T, bool) {
	a, _ := Lookup(agent)
	d, _ := a.Driver()
	t, ok := d.(T)
	return t, ok
}

// NewestMatch is the most recently modified file matching pattern (""
// when none).
func NewestMatch(pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return ""
	}
	mod := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return fi.ModTime().UnixNano()
	}
	sort.Slice(m, func(i, j int) bool { return mod(m[i]) > mod(m[j]) })
	return m[0]
}

// HeaderField is a string field of a JSONL file's first line ("" when
// absent or unreadable).
func HeaderField(path, field string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReaderSize(f, 1<<20).ReadBytes('\n')
	var h map[string]any
	if json.Unmarshal(line, &h) != nil {
		return ""
	}
	s, _ := h[field].(string)
	return s
}

// ReadJSON fills v from the JSON file at path, one of a CLI's own files (a
// login, settings, a subagent's meta file): false when the file is missing
// or not JSON. v may then be partly filled; a caller that must not take
// half a file tests the result.
func ReadJSON(path string, v any) bool {
	b, err := os.ReadFile(path)
	return err == nil && json.Unmarshal(b, v) == nil
}

// SessionTidier is a Driver whose CLI leaves stray files for a session it
// resumed that its own start-up cleanup, run by any later session in the
// same project, takes for broken: Gemini's resume in a new minute writes a
// header-only file under the session's short id, and the next Gemini start
// in that folder deletes every file with that short id, the session's own
// transcript included. The runner calls TidySession after each turn.
type SessionTidier interface {
	TidySession(home, id string) error
}

// ProjectExclusive is a Driver whose CLI must not start while another of
// its sessions runs in the same project folder under the same home: a
// Gemini start runs the cleanup SessionTidier describes, and a running
// resume's own stray is there for it to take, with the transcript. The
// runner runs one turn at a time per ProjectKey (in one process).
type ProjectExclusive interface {
	ProjectKey(home, cwd string) string
}

// TailSettler is a TailParser whose CLI writes one message as records a
// moment apart (Codex: a response_item and its event_msg copy, read as
// one): Settled is how many bytes of b, whole lines, a follower may read
// now; the rest waits for what the CLI writes next, so a read never
// falls between the two and keeps the message twice.
type TailSettler interface {
	Settled(b []byte) int
}
