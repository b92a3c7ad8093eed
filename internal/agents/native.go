package agents

import (
	"io"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/transcript"
)

// Target says where a native transcript is written so the agent's own CLI
// finds it when its folder is Home and it runs in Cwd.
type Target struct {
	// Home is the agent's own folder: CLAUDE_CONFIG_DIR for claude,
	// CODEX_HOME for codex, the ~/.gemini folder for gemini, pi's agent dir
	// (~/.pi/agent) for pi, XDG_DATA_HOME for opencode.
	Home string
	// Cwd is the working directory the session runs in (absolute).
	Cwd string
	// SessionID is the cast session id, used to derive stable native ids and
	// in pointers back ("cast read ID A:B").
	SessionID string
	// NativeID reuses an existing native id when set; otherwise the writer
	// picks one (stable for SessionID where the format allows).
	NativeID string
	// Model is written where the format records a model.
	Model string
}

// Written describes a native transcript a Writer produced.
type Written struct {
	NativeID string // the id the CLI resumes with
	Path     string // the file (or store) written
	Omitted  int    // neutral messages left out by trimming (still in the neutral copy)
}

// Reader turns a native transcript into neutral messages. Readers must not
// fail on a malformed line: they skip it and report it in the error only
// when nothing could be read.
type Reader interface {
	Read(path string) ([]transcript.Message, error)
}

// PromptReader is a Reader whose CLI's record of some prompts reads back as
// other than their text: Claude Code writes a prompt as typed, and text in
// its own markup for a slash command or a command's output reads as that
// command or a notice of its output. ReadPrompt is what the record of
// prompt reads as (false: its text), so a turn knows its own prompt in the
// file and does not store it as a second message.
type PromptReader interface {
	ReadPrompt(prompt string) (transcript.Message, bool)
}

// CwdReader is a Reader whose format records the working directory the
// session ran in; `cast import` starts the session there. "" means the
// file does not say.
type CwdReader interface {
	ReadCwd(path string) (string, error)
}

// Writer renders neutral messages as a native transcript under t.
type Writer interface {
	Write(t Target, msgs []transcript.Message) (Written, error)
}

// ReportingReader is a Reader that also says what it left out of the file:
// lines and records it skipped, counted by kind ("malformed line",
// "attachment", ...), so an import never drops content without a word.
type ReportingReader interface {
	ReadReport(path string) (msgs []transcript.Message, skipped map[string]int, err error)
}

// StreamReader is a Reader that hands a transcript's messages over one at
// a time, in order, holding neither the file nor all its messages: the
// adopting follower reads a large native session whole through it and
// sends as it reads. r holds the transcript's first size bytes and must
// not change while ReadEach runs (the reader may read it more than
// once); an error from each stops the read and is returned. The messages
// are Read's, the same in the same order.
type StreamReader interface {
	ReadEach(r io.ReaderAt, size int64, each func(transcript.Message) error) error
}

// MessageSource is a session's neutral messages kept out of memory (a
// restore spools them to a file as the export arrives): walked in order
// as often as a writer needs, each one fetched again by the position
// Each gave it.
type MessageSource interface {
	// Len is how many messages there are.
	Len() int
	// Each calls each with every message in order and its position; m
	// is each's only while it runs. An error from each stops the walk and
	// is returned.
	Each(each func(pos int64, m *transcript.Message) error) error
	// At is the message at a position Each gave.
	At(pos int64) (transcript.Message, error)
}

// StreamWriter is a Writer that reads the messages one at a time, so a
// session far larger than memory is written holding about one message
// and what pairs them (issue 27). It writes the bytes Write writes for
// the same messages. WriteFrom falls back to Write for writers without it.
type StreamWriter interface {
	WriteStream(t Target, msgs MessageSource) (Written, error)
}

// ReadReport reads path with r, with r's skip counts when it keeps them
// (nil otherwise).
func ReadReport(r Reader, path string) ([]transcript.Message, map[string]int, error) {
	if rr, ok := r.(ReportingReader); ok {
		return rr.ReadReport(path)
	}
	msgs, err := r.Read(path)
	return msgs, nil, err
}

// NewNativeID is an id under which agent's writer makes a new native
// session, never one that exists: a random UUID, or "" for an agent whose
// writer mints its own (Agent.MintsNativeID).
func NewNativeID(agent string) string {
	if a, ok := Lookup(agent); ok && a.MintsNativeID {
		return ""
	}
	return uuid.NewString()
}
