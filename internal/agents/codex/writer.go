package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

// What session_meta says about the writer. Codex refuses a rollout whose
// session_meta lacks id, timestamp, cwd, originator or cli_version.
const (
	Originator = "cast"
	// CLIVersion is the Codex version these rollouts were checked against.
	CLIVersion = "0.171.0"
)

// namespace derives stable thread ids from cast session ids.
// Never change it: existing native sessions would get new ids.
var namespace = uuid.MustParse("5f0c6a3e-6361-4374-8000-636f64657800")

// Writer writes a rollout under Target.Home (CODEX_HOME)/sessions where
// `codex resume <id>` and `codex exec resume <id>` find it.
type Writer struct {
	// Now stamps the file name and lines of messages without a time; nil
	// means time.Now.
	Now func() time.Time
}

// ThreadID is the Codex thread id for t: t.NativeID when set (it must be a
// UUID, since Codex looks the file up by the UUID in its name), else one
// derived from the cast session id.
func ThreadID(t agents.Target) (string, error) {
	if t.NativeID != "" {
		u, err := uuid.Parse(t.NativeID)
		if err != nil {
			return "", fmt.Errorf("codex: native id %q is not a UUID", t.NativeID)
		}
		return u.String(), nil
	}
	if t.SessionID == "" {
		return uuid.NewString(), nil
	}
	return uuid.NewSHA1(namespace, []byte("codex:"+t.SessionID)).String(), nil
}

// Write implements agents.Writer.
func (w Writer) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	if err := t.Check("codex"); err != nil {
		return agents.Written{}, err
	}
	id, err := ThreadID(t)
	if err != nil {
		return agents.Written{}, err
	}
	created := kit.Clock(w.Now)()
	lines, omitted := build(prepare(msgs, t.SessionID), t.SessionID)
	data := encode(id, filepath.Clean(t.Cwd), t.Model, created, lines)

	path, err := existingRollout(t.Home, id)
	if err != nil {
		return agents.Written{}, err
	}
	if path == "" {
		path = RolloutPath(t.Home, id, created)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return agents.Written{}, err
	}
	// One rename, so Codex never reads half a file.
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return agents.Written{}, err
	}
	return agents.Written{NativeID: id, Path: path, Omitted: omitted}, nil
}

// RolloutPath is where Codex itself would put a thread created at `at`:
// sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl in local time.
func RolloutPath(home, id string, at time.Time) string {
	at = at.Local()
	return filepath.Join(home, "sessions", at.Format("2006"), at.Format("01"), at.Format("02"),
		"rollout-"+at.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
}

// existingRollout finds a rollout for id anywhere under home/sessions. A
// rewrite must replace it: Codex finds a thread by the UUID in the file
// name, and two files with one id would make that ambiguous.
func existingRollout(home, id string) (string, error) {
	var found string
	root := filepath.Join(home, "sessions")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), "-"+id+".jsonl") {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}

// turnContextLine records the model of a turn. Codex 0.171 takes the model
// (and policies) of a resumed session from its config, not from here, so
// this is a record only; the policies written are the most restrictive ones
// in case a later version does restore them: an import must never grant
// more than the user's own config does.
type turnContextLine struct {
	Cwd            string            `json:"cwd"`
	ApprovalPolicy string            `json:"approval_policy"`
	SandboxPolicy  map[string]string `json:"sandbox_policy"`
	Model          string            `json:"model"`
	Summary        string            `json:"summary"`
}

// encode writes session_meta and the rendered lines, with a turn_context
// before each user turn when the model is known. Every line carries a
// top-level timestamp (Codex refuses the file otherwise); messages without a
// time get the file's creation time.
func encode(id, cwd, model string, created time.Time, lines []line) []byte {
	var b bytes.Buffer
	stamp := func(t time.Time) string {
		if t.IsZero() {
			t = created
		}
		return kit.ISOTime(t)
	}
	source := json.RawMessage(`"cli"`) // "cli" threads show in `codex resume`'s picker; "exec" ones are hidden
	meta := sessionMeta{ID: id, Timestamp: stamp(created), Cwd: cwd, Originator: Originator, CLIVersion: CLIVersion, Source: source}
	b.Write(marshal(envelope{Timestamp: stamp(created), Type: lineSessionMeta, Payload: marshal(meta)}))
	b.WriteByte('\n')
	tc := marshal(turnContextLine{Cwd: cwd, ApprovalPolicy: "untrusted", SandboxPolicy: map[string]string{"type": "read-only"}, Model: model, Summary: "auto"})
	for _, l := range lines {
		if l.turn && model != "" {
			b.Write(marshal(envelope{Timestamp: stamp(l.ts), Type: lineTurnContext, Payload: tc}))
			b.WriteByte('\n')
		}
		b.Write(marshal(envelope{Timestamp: stamp(l.ts), Type: l.typ, Payload: l.payload}))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Items renders msgs as the Responses items Codex replays (the payloads of
// the rollout's response_item lines), within the same caps as Write: the
// input thread/inject_items takes.
func Items(sessionID string, msgs []transcript.Message) (items []json.RawMessage, omitted int) {
	lines, omitted := build(prepare(msgs, sessionID), sessionID)
	return itemsOf(lines), omitted
}
