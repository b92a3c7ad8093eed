package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

func init() { agents.Register("codex", Driver{}, agents.FileCodec(Reader{}, Writer{})) }

// Driver runs Codex headless (agents.Driver).
type Driver struct{}

func (Driver) FindSession(home, id string) string {
	if id == "" {
		return ""
	}
	// A rollout idle for a week is compressed (".jsonl.zst", Codex 0.137
	// on); the plain file wins where Codex has materialized it again.
	for _, suffix := range []string{".jsonl", ".jsonl" + kit.ZstdSuffix} {
		for _, dir := range []string{filepath.Join(home, "sessions", "*", "*", "*"), filepath.Join(home, "sessions")} {
			if p := agents.NewestMatch(filepath.Join(dir, "rollout-*-"+id+suffix)); p != "" {
				return p
			}
		}
	}
	return ""
}

// SessionID takes the thread id from a rollout file's name.
func (Driver) SessionID(path string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), kit.ZstdSuffix), ".jsonl")
	if len(base) < 36 {
		return ""
	}
	id := base[len(base)-36:]
	if _, err := uuid.Parse(id); err != nil {
		return ""
	}
	return id
}

// ParseTail parses appended rollout lines, numbering their "line:N"
// NativeIDs as a read of the whole file would.
func (Driver) ParseTail(b []byte, linesBefore int) ([]transcript.Message, error) {
	p, err := Parse(bytes.NewReader(b))
	shiftLineIDs(p.Messages, linesBefore)
	return p.Messages, err
}

var lineID = regexp.MustCompile(`^line:(\d+)(.*)$`)

// shiftLineIDs turns "line:N" NativeIDs of a parsed suffix into the whole
// file's numbering.
func shiftLineIDs(msgs []transcript.Message, before int) {
	if before == 0 {
		return
	}
	for i := range msgs {
		if m := lineID.FindStringSubmatch(msgs[i].NativeID); m != nil {
			n, _ := strconv.Atoi(m[1])
			msgs[i].NativeID = "line:" + strconv.Itoa(n+before) + m[2]
		}
	}
}

// Stdout reads `codex exec --json` events: thread.started names a fresh
// thread, error and turn.failed carry the failure.
func (Driver) Stdout(line []byte) agents.Event {
	var ev struct {
		Type     string `json:"type"`
		ThreadID string `json:"thread_id"`
		Message  string `json:"message"`
		Error    *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return agents.Event{}
	}
	switch ev.Type {
	case "thread.started":
		return agents.Event{SessionID: ev.ThreadID}
	case "error":
		return agents.Event{Err: ev.Message}
	case "turn.failed":
		if ev.Error != nil {
			return agents.Event{Err: ev.Error.Message}
		}
	}
	return agents.Event{}
}

// StoppedExit: `codex exec` (0.171) exits 1 on SIGINT mid-turn with
// nothing on stderr and no event after thread.started (its node launcher
// passes a SIGINT on to it; it dies of SIGTERM). Its own failures say why:
// an error or turn.failed event, or a message on stderr.
func (Driver) StoppedExit(exit int, stdout, stderr string) bool {
	types, text := agents.StdoutEvents(stdout)
	return exit == 1 && strings.TrimSpace(stderr) == "" && len(text) == 0 &&
		types["error"]+types["turn.failed"]+types["turn.completed"] == 0
}

// DeliverLarge adds a prompt longer than one Codex turn takes to the
// thread's history through the app-server (thread/inject_items has no
// cap).
func (Driver) DeliverLarge(ctx context.Context, bin string, env []string, cwd, id, path, prompt string) (agents.Delivered, error) {
	got, err := DeliverLarge(ctx, bin, env, cwd, id, path, prompt)
	return agents.Delivered{ID: got.ThreadID, Path: got.Path}, err
}

// LargeTurn is the turn that points the model at a prompt DeliverLarge
// added.
func (Driver) LargeTurn(prompt string) string {
	return LargePromptTurn(utf8.RuneCountInString(prompt))
}

func (Driver) LargeHow(bin string) string {
	return "through `" + bin + " app-server` (thread/inject_items)"
}

// EphemeralArgs: `codex exec --ephemeral` writes no rollout and leaves the
// thread out of its SQLite index (a removed rollout would not).
func (Driver) EphemeralArgs() []string { return []string{"--ephemeral"} }

// SessionFiles: rollouts by date (a compressed idle rollout is left to
// Codex, which materializes it again when resumed).
func (Driver) SessionFiles(home string) []string {
	return []string{filepath.Join(home, "sessions", "*", "*", "*", "rollout-*.jsonl")}
}
