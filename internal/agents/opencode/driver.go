package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

func init() {
	agents.Register("opencode", Driver{}, agents.Codec{Reader: Reader{}, NewWriter: newWriter})
}

// newWriter is the writer loading sessions with the opencode CLI bin
// (default: on PATH) in env (default: this process's).
func newWriter(bin string, env []string) (agents.Writer, error) {
	if bin == "" {
		p, err := exec.LookPath("opencode")
		if err != nil {
			return nil, fmt.Errorf("writing an OpenCode session needs the opencode CLI; install opencode-ai or pass its path")
		}
		bin = p
	}
	if env == nil {
		env = os.Environ()
	}
	return Writer{Loader: Loader{Bin: bin, Env: env}}, nil
}

// Driver runs OpenCode headless (agents.Driver, agents.StoreDriver): its
// sessions are rows in its SQLite store, a turn's output is read from
// `opencode run --format json` and a whole session through `opencode
// export`.
type Driver struct{}

// FindSession: there is no file per session, only the store.
func (Driver) FindSession(string, string) string { return "" }

func (Driver) SessionID(string) string { return "" }

func (Driver) StorePath(home string) string { return DBPath(home) }

// StoredSessions lists the sessions in OpenCode's database
// (agents.StoreLister), read directly: no CLI runs.
func (Driver) StoredSessions(ctx context.Context, _ string, _ []string, home string) ([]agents.StoredSession, error) {
	return StoreSessions(ctx, home)
}

// Export reads session id from OpenCode's database as `opencode export`
// prints it (StoreExport): no CLI runs.
func (Driver) Export(ctx context.Context, _ string, _ []string, t agents.Target, id string) ([]transcript.Message, error) {
	out, err := StoreExport(ctx, t.Home, id)
	if err != nil {
		return nil, err
	}
	p, err := Parse(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	return p.Messages, nil
}

// Stdout maps one `opencode run --format json` event. Text parts arrive
// complete and tool parts once they finished, in the shape `opencode
// export` uses, so the Reader's own mapping gives the same NativeIDs an
// export would.
func (Driver) Stdout(line []byte) agents.Event {
	var ev struct {
		Type      string          `json:"type"`
		SessionID string          `json:"sessionID"`
		Part      *Part           `json:"part"`
		Error     json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return agents.Event{}
	}
	out := agents.Event{SessionID: ev.SessionID}
	if ev.Type == "error" {
		out.Err = string(ev.Error)
		return out
	}
	if ev.Part == nil {
		return out
	}
	switch ev.Part.Type {
	case "text", "reasoning", "tool":
	default:
		return out
	}
	// An event's part is done (run prints it once it is), though its
	// message goes on: marked completed, the reader takes it as it is.
	var done int64
	ex := Export{
		Info: SessionInfo{ID: ev.Part.SessionID},
		Messages: []Message{{Info: MessageInfo{ID: ev.Part.MessageID, SessionID: ev.Part.SessionID, Role: "assistant", Time: MsgTime{Completed: &done}},
			Parts: []Part{*ev.Part}}},
	}
	raw, err := json.Marshal(ex)
	if err != nil {
		return out
	}
	p, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return out
	}
	out.Messages = p.Messages
	return out
}

// RemoveSession deletes session id from OpenCode's store with its own
// `opencode session delete`.
func (Driver) RemoveSession(ctx context.Context, bin string, env []string, t agents.Target, id string) error {
	if id == "" {
		return nil
	}
	_, err := Loader{Bin: bin, Env: env}.run(ctx, t, "session", "delete", id)
	return err
}
