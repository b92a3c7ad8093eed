// Package opencode is OpenCode's agent: its registry entry (agent.go) and
// driver. It reads and writes OpenCode sessions in the JSON shape that
// `opencode export <id>` prints and `opencode import FILE` loads, loads
// such a file into OpenCode's store (SQLite under XDG_DATA_HOME) by running
// the real `opencode import`, and reads that store itself, read-only, as
// the export would print it (db.go).
//
// The facts this code relies on were observed against OpenCode 1.18.33 (see
// shared/research/realclient-codex-opencode.md and the tests here): import
// refuses a file missing any required key, is not atomic, and ignores a
// session or message whose id already exists; messages replay in id order;
// the next prompt uses the model of the last user message.
package opencode

import (
	"bufio"
	"encoding/json"
	"io"

	"github.com/cast-dev/cast/internal/agents/kit"
)

// Version is the OpenCode version the exports are written for.
const Version = "1.18.33"

// Export is a session as `opencode export` prints it.
type Export struct {
	Info     SessionInfo `json:"info"`
	Messages []Message   `json:"messages"`
}

// SessionInfo is the session header. slug, version and time are required
// by import; projectID defaults to the project of the directory import runs
// in.
type SessionInfo struct {
	ID        string   `json:"id"`
	Slug      string   `json:"slug"`
	ProjectID string   `json:"projectID,omitempty"`
	Directory string   `json:"directory,omitempty"`
	ParentID  string   `json:"parentID,omitempty"`
	Title     string   `json:"title"`
	Version   string   `json:"version"`
	Time      TimeSpan `json:"time"`
}

// TimeSpan is a created/updated pair in Unix milliseconds.
type TimeSpan struct {
	Created int64 `json:"created"`
	Updated int64 `json:"updated,omitempty"`
}

// Message is one message with its parts.
type Message struct {
	Info  MessageInfo `json:"info"`
	Parts []Part      `json:"parts"`
}

// MessageInfo covers user and assistant messages. Import requires time and
// agent on both; model on users; parentID, mode, path, cost, tokens and
// modelID on assistants.
type MessageInfo struct {
	ID        string  `json:"id"`
	SessionID string  `json:"sessionID"`
	Role      string  `json:"role"`
	Time      MsgTime `json:"time"`
	Agent     string  `json:"agent"`

	// user
	Model *ModelRef `json:"model,omitempty"`

	// assistant
	ParentID   string   `json:"parentID,omitempty"`
	Mode       string   `json:"mode,omitempty"`
	Path       *Path    `json:"path,omitempty"`
	Cost       *float64 `json:"cost,omitempty"`
	Tokens     *Tokens  `json:"tokens,omitempty"`
	ModelID    string   `json:"modelID,omitempty"`
	ProviderID string   `json:"providerID,omitempty"`
	Finish     string   `json:"finish,omitempty"`
	// Summary is true on the assistant message a compaction produced (a
	// user message has an object here instead, hence raw).
	Summary json.RawMessage `json:"summary,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// MsgTime is a message's creation (and, for assistants, completion) time.
type MsgTime struct {
	Created   int64  `json:"created"`
	Completed *int64 `json:"completed,omitempty"`
}

// ModelRef names a configured model.
type ModelRef struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

// Path is where an assistant message ran.
type Path struct {
	Cwd  string `json:"cwd"`
	Root string `json:"root"`
}

// Tokens is an assistant message's usage.
type Tokens struct {
	Input     int        `json:"input"`
	Output    int        `json:"output"`
	Reasoning int        `json:"reasoning"`
	Cache     CacheUsage `json:"cache"`
}

// CacheUsage is the cache part of Tokens.
type CacheUsage struct {
	Read  int `json:"read"`
	Write int `json:"write"`
}

// Part is one part of a message. Types cast reads: text, reasoning, tool,
// file (as a placeholder); others (step-start, step-finish, patch, ...) are
// skipped.
type Part struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`

	Text      string    `json:"text,omitempty"`
	Synthetic bool      `json:"synthetic,omitempty"`
	Ignored   bool      `json:"ignored,omitempty"`
	Time      *PartTime `json:"time,omitempty"`

	Tool   string     `json:"tool,omitempty"`
	CallID string     `json:"callID,omitempty"`
	State  *ToolState `json:"state,omitempty"`

	// file parts (an attached image or file): an image whose url is a
	// data URL is carried whole; anything else keeps only a placeholder.
	Mime     string `json:"mime,omitempty"`
	Filename string `json:"filename,omitempty"`
	URL      string `json:"url,omitempty"`
}

// PartTime is when a part started and ended (Unix ms).
type PartTime struct {
	Start int64 `json:"start"`
	End   int64 `json:"end,omitempty"`
}

// ToolState is a tool part's call and outcome. status is pending, running,
// completed (input, output, title, metadata, time required) or error
// (input, error, time required).
type ToolState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Output   string          `json:"output"`
	Error    string          `json:"error"`
	Title    string          `json:"title"`
	Metadata json.RawMessage `json:"metadata"`
	Time     *PartTime       `json:"time"`
	// Attachments are files a completed tool returned (file parts): images
	// with a data URL are carried, others reported.
	Attachments []Part `json:"attachments,omitempty"`
}

// MarshalJSON writes exactly the keys import requires for the status, so
// an empty output is still present on a completed call and no empty error
// key appears on it.
func (s ToolState) MarshalJSON() ([]byte, error) {
	in := rawOr(s.Input, "{}")
	switch s.Status {
	case "completed":
		return json.Marshal(struct {
			Status      string          `json:"status"`
			Input       json.RawMessage `json:"input"`
			Output      string          `json:"output"`
			Title       string          `json:"title"`
			Metadata    json.RawMessage `json:"metadata"`
			Time        *PartTime       `json:"time,omitempty"`
			Attachments []Part          `json:"attachments,omitempty"`
		}{s.Status, in, s.Output, s.Title, rawOr(s.Metadata, "{}"), s.Time, s.Attachments})
	case "error":
		return json.Marshal(struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Error    string          `json:"error"`
			Metadata json.RawMessage `json:"metadata,omitempty"`
			Time     *PartTime       `json:"time,omitempty"`
		}{s.Status, in, s.Error, s.Metadata, s.Time})
	}
	return json.Marshal(struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Title  string          `json:"title,omitempty"`
		Time   *PartTime       `json:"time,omitempty"`
	}{s.Status, in, s.Title, s.Time})
}

func rawOr(r json.RawMessage, def string) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return json.RawMessage(def)
	}
	return r
}

// marshal encodes without HTML escaping so "<" and "&" in code stay as they
// are in the file.
func marshal(v any) json.RawMessage { return kit.RawJSON(v, "{}") }

// WriteExport streams ex as JSON to w one message at a time: a long
// session's document is never built in memory whole (encoding/json would
// grow one buffer to the size of the file).
func WriteExport(w io.Writer, ex Export) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := kit.NewEncoder(bw)
	bw.WriteString(`{"info":`)
	if err := enc.Encode(ex.Info); err != nil {
		return err
	}
	bw.WriteString(`,"messages":[`)
	for i, m := range ex.Messages {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
