package muse

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name recorded on neutral messages read from Muse.
const Agent = "muse"

// Reader reads a Muse session record log (JSONL).
type Reader struct {
	kit.FileReader[recordLog, Decoded]
}

// Decoded is everything a reader got out of one session log. What it left
// out (Kinds) are malformed lines and other streams' records.
type Decoded struct {
	kit.Decoding
	SessionID string // the session stream's id
	Cwd       string // metadata workspace_root
	Model     string // metadata model_id (else the first model_completed model)
	Skipped   int    // lines that were not JSON or lacked the record envelope
	Foreign   int    // well-formed records of other streams (subagent tasks)
}

// recordLog is the format Reader reads.
type recordLog struct{}

// Decode is the package's Decode of what r holds: a session's records
// come back ordered by sequence, so the log is read whole.
func (recordLog) Decode(r io.ReadSeeker) (Decoded, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Decoded{}, err
	}
	return Decode(data)
}

// Decode reads a session log. Malformed lines are skipped and counted; it
// fails only when there were lines and none was a record.
func Decode(data []byte) (Decoded, error) {
	var d Decoded
	var recs []record
	used := 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var r record
		if json.Unmarshal(line, &r) != nil || !r.valid() {
			d.Skipped++
			d.Kinds.Add("malformed line")
			continue
		}
		used++
		if d.SessionID == "" && r.Stream.Kind == "session" {
			d.SessionID = r.Stream.ID
		}
		recs = append(recs, r)
	}
	// An empty file is a session with nothing in it yet; only garbage is
	// an error.
	if used == 0 && d.Skipped > 0 {
		return d, errors.New("muse: no session record found")
	}
	own := recs[:0]
	for _, r := range recs {
		if r.Stream.Kind == "session" && r.Stream.ID == d.SessionID {
			own = append(own, r)
		} else {
			d.Foreign++
			d.Kinds.Add("record of another stream (a subagent task)")
		}
	}
	// Sequences number records within their stream; file order breaks ties.
	sort.SliceStable(own, func(i, j int) bool { return *own[i].Sequence < *own[j].Sequence })
	st := state{d: &d, batches: map[string][]string{}, names: map[string]string{}}
	for _, r := range own {
		st.record(r)
	}
	if d.Model == "" {
		d.Model = st.completed
	}
	for i := range d.Messages {
		m := &d.Messages[i]
		if m.Model == "" && m.Kind != transcript.KindUser && m.Kind != transcript.KindToolResult {
			m.Model = d.Model
		}
	}
	return d, nil
}

// state carries what later records of the session stream refer back to.
type state struct {
	d         *Decoded
	model     string              // the latest metadata model_id
	completed string              // the first model_completed model
	batches   map[string][]string // tool calls message_id -> call ids, by tool_call_index
	names     map[string]string   // call id -> tool name
}

// record reads one record of the session stream.
func (st *state) record(r record) {
	if r.PayloadType == "runtime.session.metadata" || r.Payload.Kind == "metadata" {
		st.metadata(r)
		return
	}
	switch {
	case r.Payload.Kind == "task":
		return // a task's status: bookkeeping
	case r.Payload.Kind != "run":
		st.d.Kinds.Add(cmp.Or(r.Payload.Kind, "untyped") + " record")
		return
	case r.Payload.Event == nil:
		st.d.Kinds.Add("run record without an event")
		return
	}
	st.event(r, r.Payload.Event)
}

// metadata takes the model and workspace a metadata record names.
func (st *state) metadata(r record) {
	if m := r.Payload.Record.ModelID; m != "" {
		st.model = m
		if st.d.Model == "" {
			st.d.Model = m
		}
	}
	if w := r.Payload.Record.WorkspaceRoot; w != "" && st.d.Cwd == "" {
		st.d.Cwd = w
	}
}

// event reads ev, the event of the run record r.
func (st *state) event(r record, ev *event) {
	switch ev.Kind {
	case "started":
		if p := textOf(ev.Prompt); strings.TrimSpace(p) != "" {
			st.add(r, transcript.Message{Kind: transcript.KindUser, Text: p}, "")
		}
	case "model_completed":
		var m string
		if st.completed == "" && json.Unmarshal(ev.Model, &m) == nil {
			st.completed = m
		}
	case "reasoning_committed":
		// Only encrypted content most of the time: nothing cast may show.
		if t := textOf(ev.Text); strings.TrimSpace(t) != "" {
			st.add(r, transcript.Message{Kind: transcript.KindThinking, Text: t, Model: st.model}, "")
		}
	case "assistant_message_committed":
		if t := textOf(ev.Text); strings.TrimSpace(t) != "" {
			st.add(r, transcript.Message{Kind: transcript.KindAssistant, Text: t, Model: st.model}, "")
		}
	case "assistant_tool_calls_committed":
		st.toolCalls(r, ev)
	case "tool_result_batch_committed":
		st.toolResults(r, ev)
	default:
		if !quietEvents[ev.Kind] {
			st.d.Kinds.Add(cmp.Or(ev.Kind, "untyped") + " event")
		}
	}
}

// add appends m, read from r; suffix tells apart the messages of one
// record.
func (st *state) add(r record, m transcript.Message, suffix string) {
	nid := r.ID
	if nid == "" {
		nid = fmt.Sprintf("seq:%d", *r.Sequence)
	}
	m.Agent, m.NativeID, m.Time = Agent, nid+suffix, r.time()
	st.d.Messages = append(st.d.Messages, m)
}

// toolCalls reads the calls of an assistant_tool_calls_committed event,
// keeping their ids in order for the results that name a call by its
// index.
func (st *state) toolCalls(r record, ev *event) {
	var ids []string
	for _, c := range ev.ToolCalls {
		id := c.CallID // what results name; "id" is the provider's item id
		if id == "" {
			id = c.ID
		}
		ids = append(ids, id)
		if id == "" || c.Name == "" {
			st.d.Kinds.Add("tool call without an id or name")
			continue
		}
		st.names[id] = c.Name
		in := c.Args
		if len(in) == 0 {
			in = c.Arguments
		}
		st.add(r, transcript.Message{Kind: transcript.KindToolCall, Model: st.model,
			ToolCall: &transcript.ToolCall{ID: id, Name: c.Name, Input: textOf(in)}}, "#call:"+id)
	}
	if ev.MessageID != "" {
		st.batches[ev.MessageID] = ids
	}
}

// toolResults reads the results of a tool_result_batch_committed event.
func (st *state) toolResults(r record, ev *event) {
	for _, res := range ev.Results {
		id := res.ToolCallID
		if calls := st.batches[ev.BatchID]; id == "" && res.ToolCallIndex != nil &&
			*res.ToolCallIndex >= 0 && *res.ToolCallIndex < len(calls) {
			id = calls[*res.ToolCallIndex]
		}
		if id == "" {
			st.d.Kinds.Add("tool result without a call id")
			continue
		}
		out := textOf(res.Text)
		tr := &transcript.ToolResult{CallID: id, Output: out, IsError: strings.HasPrefix(out, failedPrefix)}
		if shellTools[st.names[id]] {
			tr.ExitCode, tr.IsError = shellOutcome(out, tr.IsError)
		}
		st.add(r, transcript.Message{Kind: transcript.KindToolResult, ToolResult: tr}, "#result:"+id)
	}
}

// quietEvents are run events that carry no conversation: usage, the run's
// end, context diagnostics.
var quietEvents = map[string]bool{"terminal": true, "context_block_diagnostic": true, "usage": true}

// failedPrefix starts the text of a result whose tool failed to run.
const failedPrefix = "tool failed:"

// shellTools are the Muse tools whose result is a JSON report with the
// process's exit code.
var shellTools = map[string]bool{"bash": true}

// shellOutcome reads a shell report such as
// {"exit_code":5,"terminal_status":"failed","output":"boom\n",...}.
func shellOutcome(out string, failed bool) (*int32, bool) {
	var rep struct {
		ExitCode       *int32 `json:"exit_code"`
		TerminalStatus string `json:"terminal_status"`
	}
	if !strings.HasPrefix(strings.TrimSpace(out), "{") || json.Unmarshal([]byte(out), &rep) != nil {
		return nil, failed
	}
	if rep.ExitCode != nil && *rep.ExitCode != 0 || rep.TerminalStatus == "failed" {
		failed = true
	}
	return rep.ExitCode, failed
}

// textOf reads a JSON string, or keeps any other JSON as its text so
// nothing is lost.
func textOf(raw json.RawMessage) string {
	if s, ok := kit.StringJSON(raw); ok {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

func (r record) time() time.Time {
	us, err := r.RecordedAt.Int64()
	if err != nil {
		f, ferr := r.RecordedAt.Float64()
		if ferr != nil {
			return time.Time{}
		}
		us = int64(f)
	}
	t := time.UnixMicro(us).UTC()
	if us <= 0 || t.Year() > 9999 {
		return time.Time{} // not a time JSON can carry back
	}
	return t
}
