package repair

import (
	"iter"
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
)

// OrphanCallOutput is the result a writer gives a tool call whose result the
// source never recorded (it was interrupted or lost): most agents and APIs
// refuse or mangle a call left without one.
const OrphanCallOutput = "(no result was recorded for this tool call; it was interrupted or its result was lost)"

// OrphanResultName and OrphanResultArgs are the stand-in call a writer
// puts before a result whose call the source never recorded, in a format
// that cannot keep a result without its call (Codex, OpenCode).
const (
	OrphanResultName = "unrecorded_tool_call"
	OrphanResultArgs = `{"note":"this tool call was not recorded in the transcript; only its result was"}`
)

// IndexCalls indexes msgs by tool call id: results maps a call id to its
// first result, calls holds the id of every tool call. Writers use it to
// place each result with its call and to find results without a call.
func IndexCalls(msgs []transcript.Message) (results map[string]*transcript.ToolResult, calls map[string]bool) {
	p := NewCallPositions()
	for i := range msgs {
		p.Add(int64(i), &msgs[i])
	}
	results = make(map[string]*transcript.ToolResult, len(p.Results))
	for id, i := range p.Results {
		results[id] = msgs[i].ToolResult
	}
	return results, p.Calls
}

// CallPositions is IndexCalls for messages read one at a time (a session
// spooled to a file): Results maps a call id to the position of its first
// result, to be read again when its call is written; Calls holds the id
// of every tool call.
type CallPositions struct {
	Results map[string]int64
	Calls   map[string]bool
}

// NewCallPositions is an empty index.
func NewCallPositions() *CallPositions {
	return &CallPositions{Results: map[string]int64{}, Calls: map[string]bool{}}
}

// IndexPositions indexes every message each walks (a MessageSource's
// Each): a writer's first pass over a spooled session.
func IndexPositions(each func(func(pos int64, m *transcript.Message) error) error) (*CallPositions, error) {
	p := NewCallPositions()
	err := each(func(pos int64, m *transcript.Message) error {
		p.Add(pos, m)
		return nil
	})
	return p, err
}

// Add indexes m, found at pos.
func (p *CallPositions) Add(pos int64, m *transcript.Message) {
	switch {
	case m.Kind == transcript.KindToolResult && m.ToolResult != nil:
		if _, dup := p.Results[m.ToolResult.CallID]; !dup {
			p.Results[m.ToolResult.CallID] = pos
		}
	case m.Kind == transcript.KindToolCall && m.ToolCall != nil:
		p.Calls[m.ToolCall.ID] = true
	}
}

// OrphanResultText is a tool result whose call is not in the history, as
// plain user text: an agent whose API rejects a result without its call
// still sees what the tool said.
func OrphanResultText(r *transcript.ToolResult) string {
	if r.IsError {
		return "[Error from tool call " + r.CallID + ", whose call is not in this history]\n" + r.Output
	}
	return "[Result of tool call " + r.CallID + ", whose call is not in this history]\n" + r.Output
}

// Writable yields, in order, the messages a writer renders: those that are
// Rendered and valid (a message that fails Validate is left out rather
// than written broken).
func Writable(msgs []transcript.Message) iter.Seq[*transcript.Message] {
	return func(yield func(*transcript.Message) bool) {
		for i := range msgs {
			if m := &msgs[i]; IsWritable(m) && !yield(m) {
				return
			}
		}
	}
}

// IsWritable says whether Writable yields m.
func IsWritable(m *transcript.Message) bool { return m.Rendered() && m.Validate() == nil }

// Blank says whether m shows nothing: its text is white space and it
// carries no picture (a user may paste one alone; a valid message of
// another kind that shows text carries none). A writer leaves a blank
// user or assistant message out rather than send an empty turn.
func Blank(m *transcript.Message) bool { return strings.TrimSpace(m.Text) == "" && len(m.Images) == 0 }
