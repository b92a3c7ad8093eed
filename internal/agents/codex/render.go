package codex

import (
	"encoding/json"
	"time"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/transcript"
)

// Texts the writer puts where the source had nothing. Codex itself would
// send "aborted" for an unanswered call and silently drop an output without
// its call; cast says what happened instead.
const (
	OrphanCallOutput = repair.OrphanCallOutput
	OrphanResultName = repair.OrphanResultName
	OrphanResultArgs = repair.OrphanResultArgs
)

// line is one rendered rollout line before it gets a timestamp. msg is the
// index of the neutral message it renders, or -1 for a line cast made up
// (paired orphans, the trim note).
type line struct {
	typ     string // lineResponseItem or lineEventMsg
	payload json.RawMessage
	ts      time.Time
	msg     int
	turn    bool // the user item that opens a turn
}

// marshal encodes without HTML escaping: "<" in a user's code must reach the
// model as "<", not as \u003c.
func marshal(v any) json.RawMessage { return kit.RawJSON(v, "null") }

type msgItem struct {
	Type    string        `json:"type"`
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type callItem struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
	Input     string `json:"input,omitempty"`
	CallID    string `json:"call_id"`
}

type outputItem struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"` // a string, or content parts with images
}

type userEvent struct {
	Type    string          `json:"type"`
	Message string          `json:"message"`
	Images  json.RawMessage `json:"images"`
}

// renderer turns neutral messages into rollout lines, pairing every tool
// call with exactly one output so Codex neither drops nor invents any.
type renderer struct {
	msgs     []transcript.Message
	lines    []line
	pending  []string        // call ids written, output not yet written
	custom   map[string]bool // call id -> rendered as custom_tool_call
	written  map[string]bool // call ids whose call line exists
	done     map[string]bool // call ids whose output line exists
	resultAt map[string]int  // call id -> index of its first result message
	callAt   map[string]int  // call id -> index of its call message
}

// render renders msgs (already filtered and clipped) as rollout lines.
func render(msgs []transcript.Message) []line {
	r := &renderer{
		msgs: msgs, custom: map[string]bool{}, written: map[string]bool{}, done: map[string]bool{},
		resultAt: map[string]int{}, callAt: map[string]int{},
	}
	for i, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			if _, seen := r.callAt[m.ToolCall.ID]; !seen {
				r.callAt[m.ToolCall.ID] = i
			}
		case transcript.KindToolResult:
			if _, seen := r.resultAt[m.ToolResult.CallID]; !seen {
				r.resultAt[m.ToolResult.CallID] = i
			}
		}
	}
	for i, m := range msgs {
		r.one(i, m)
	}
	r.flush(len(msgs))
	return r.lines
}

func (r *renderer) add(typ string, payload any, ts time.Time, msg int) {
	r.lines = append(r.lines, line{typ: typ, payload: marshal(payload), ts: ts, msg: msg})
}

func (r *renderer) one(i int, m transcript.Message) {
	switch m.Kind {
	case transcript.KindToolCall:
		r.call(i, m)
		return
	case transcript.KindToolResult:
		r.result(i, m)
		return
	}
	// Any other message closes the tool block: Codex expects a call's output
	// before the conversation moves on.
	r.flush(i)
	switch m.Kind {
	case transcript.KindUser:
		r.add(lineResponseItem, msgItem{Type: "message", Role: "user", Content: inputParts(m.Text, m.Images)}, m.Time, i)
		r.lines[len(r.lines)-1].turn = true
		r.add(lineEventMsg, userEvent{Type: "user_message", Message: m.Text, Images: json.RawMessage("null")}, m.Time, i)
	case transcript.KindAssistant:
		r.add(lineResponseItem, msgItem{Type: "message", Role: "assistant", Content: []contentPart{{Type: "output_text", Text: m.Text}}}, m.Time, i)
		r.add(lineEventMsg, eventMsg{Type: "agent_message", Message: m.Text}, m.Time, i)
	case transcript.KindThinking:
		// UI only. A reasoning item without Codex's encrypted_content (which
		// no other agent has) may be refused by the real Responses API, and
		// thinking is optional for targets.
		r.add(lineEventMsg, eventMsg{Type: "agent_reasoning", Text: m.Text}, m.Time, i)
	case transcript.KindNotice:
		r.add(lineResponseItem, msgItem{Type: "message", Role: "developer", Content: []contentPart{{Type: "input_text", Text: kit.CastNotice.Wrap(m.NoticeType, m.Text)}}}, m.Time, i)
	}
}

func (r *renderer) call(i int, m transcript.Message) {
	id := m.ToolCall.ID
	if r.written[id] {
		return // moved up to sit before its result, or a duplicate
	}
	r.written[id] = true
	rc := renderCall(m.ToolCall.Name, m.ToolCall.Input)
	if rc.custom {
		r.custom[id] = true
		r.add(lineResponseItem, callItem{Type: "custom_tool_call", Name: rc.name, Input: rc.args, CallID: id}, m.Time, i)
	} else {
		r.add(lineResponseItem, callItem{Type: "function_call", Name: rc.name, Arguments: rc.args, CallID: id}, m.Time, i)
	}
	r.pending = append(r.pending, id)
}

func (r *renderer) result(i int, m transcript.Message) {
	id := m.ToolResult.CallID
	if r.done[id] {
		return // already written (moved up, or a second result for one call)
	}
	if !r.written[id] {
		if ci, ok := r.callAt[id]; ok {
			// The call comes later in the source: write it first.
			r.call(ci, r.msgs[ci])
		} else {
			// No call anywhere: Codex would drop this output silently.
			r.written[id] = true
			r.add(lineResponseItem, callItem{Type: "function_call", Name: OrphanResultName, Arguments: OrphanResultArgs, CallID: id}, m.Time, -1)
			r.pending = append(r.pending, id)
		}
	}
	r.output(id, renderOutput(m.ToolResult.Output, m.ToolResult.ExitCode, m.ToolResult.IsError), m.Images, m.Time, i)
}

func (r *renderer) output(id, text string, images []transcript.Image, ts time.Time, msg int) {
	typ := "function_call_output"
	if r.custom[id] {
		typ = "custom_tool_call_output"
	}
	var out any = text
	if len(images) > 0 {
		// The array form of an output: Codex sends its parts, images
		// included, as the function output the API takes.
		out = inputParts(text, images)
	}
	r.add(lineResponseItem, outputItem{Type: typ, CallID: id, Output: out}, ts, msg)
	r.done[id] = true
	for k, p := range r.pending {
		if p == id {
			r.pending = append(r.pending[:k], r.pending[k+1:]...)
			break
		}
	}
}

// flush writes an output for every call still open before message index
// `at`: the real result if the source has it later (moved up), else an
// explicit note.
func (r *renderer) flush(at int) {
	for len(r.pending) > 0 {
		id := r.pending[0]
		if ri, ok := r.resultAt[id]; ok && ri > at {
			res := r.msgs[ri].ToolResult
			r.output(id, renderOutput(res.Output, res.ExitCode, res.IsError), r.msgs[ri].Images, r.msgs[ri].Time, ri)
			continue
		}
		var ts time.Time
		if ci, ok := r.callAt[id]; ok {
			ts = r.msgs[ci].Time
		}
		r.output(id, OrphanCallOutput, nil, ts, -1)
	}
}

// isModelItem reports whether l is replayed to the model (counts toward the
// item and byte caps).
func (l line) isModelItem() bool { return l.typ == lineResponseItem }

// itemsOf returns the payloads of the model-visible lines, the shape
// thread/inject_items takes.
func itemsOf(lines []line) []json.RawMessage {
	var out []json.RawMessage
	for _, l := range lines {
		if l.isModelItem() {
			out = append(out, l.payload)
		}
	}
	return out
}

// keep reports whether a neutral message is written to Codex at all.
func keep(m transcript.Message) bool {
	switch {
	case !repair.IsWritable(&m):
		return false
	case m.Kind == transcript.KindUser, m.Kind == transcript.KindAssistant, m.Kind == transcript.KindThinking:
		return !repair.Blank(&m)
	}
	return true
}
