package opencode

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name cast records on messages read from OpenCode.
const Agent = "opencode"

// Reader reads what `opencode export` prints (or OpenCode's SQLite rows
// dumped as JSONL) into neutral messages.
type Reader struct {
	kit.CwdFileReader[exportFile, Parsed]
}

// ReadSubagent implements agents.SubagentReader: a session with a parent
// is one OpenCode's task tool started for a subagent.
func (Reader) ReadSubagent(path string) (agents.Subagent, bool, error) {
	p, err := kit.DecodeFile(path, Parse)
	if err != nil || p.ParentID == "" {
		return agents.Subagent{}, false, err
	}
	return agents.Subagent{Kind: "child session", ParentNativeID: p.ParentID}, true, nil
}

// Parsed is a session read into neutral form. What it left out (Kinds) are
// part types of other versions and malformed rows.
type Parsed struct {
	kit.Decoding
	SessionID string
	Directory string
	ParentID  string // the session whose task tool started this one (a subagent's run)
	Skipped   int    // JSONL rows that were not JSON objects
}

func (p *Parsed) skip(kind string) { p.Kinds.Add(kind) }

// bookkeepingParts carry no conversation: step boundaries, the snapshot
// hashes and file lists of a step.
var bookkeepingParts = map[string]bool{"step-start": true, "step-finish": true, "snapshot": true, "patch": true}

// exportFile is the format Reader reads: Parse, and the session's
// directory.
type exportFile struct{}

func (exportFile) Decode(r io.ReadSeeker) (Parsed, error) { return Parse(r) }
func (exportFile) Cwd(p Parsed) string                    { return p.Directory }

// Parse reads an export document or a JSONL dump of session rows.
// r is a ReadSeeker (never sought) so Parse fits kit.DecodeFile.
func Parse(r io.ReadSeeker) (Parsed, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Parsed{}, err
	}
	// `opencode export` may be captured with a log line in front of the JSON.
	if i := bytes.IndexByte(data, '{'); i > 0 {
		data = data[i:]
	}
	var p Parsed
	if ex, ok := decodeExport(data, p.skip); ok && (ex.Info.ID != "" || len(ex.Messages) > 0) {
		fromExport(ex, &p)
		return p, nil
	}
	p, ok := parseRows(data)
	if !ok {
		return p, errors.New("opencode: neither an export document nor session rows")
	}
	return p, nil
}

func ms(v int64) time.Time {
	if v <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func fromExport(ex Export, p *Parsed) {
	p.SessionID, p.Directory, p.ParentID = ex.Info.ID, ex.Info.Directory, ex.Info.ParentID
	for i, m := range ex.Messages {
		streaming := i == len(ex.Messages)-1 && m.Info.Role == "assistant" && m.Info.Time.Completed == nil
		p.Messages = append(p.Messages, messageParts(m, streaming, p)...)
	}
}

// unfinished says whether part is a text or reasoning part OpenCode is
// still streaming into the store: it writes one at every delta, with its
// time.end (and the message's time.completed) only once it is done, the
// text trimmed then. Read half-way (adoption exports the user's own
// session while its turn runs), the finished text has another digest and
// both were kept. Only the last message, not completed, streams: an
// interrupted turn completes its message with the part as it got.
func unfinished(part Part, streaming bool) bool {
	return streaming && part.Time != nil && part.Time.Start > 0 && part.Time.End == 0
}

// decodeExport decodes an export document; ok is false when data is not
// one. A message or part of a shape the reader does not expect (a field
// of another JSON type) is told to skip and its neighbours are kept.
func decodeExport(data []byte, skip func(kind string)) (Export, bool) {
	var ex Export
	if json.Unmarshal(data, &ex) == nil {
		return ex, true
	}
	var loose struct {
		Info     SessionInfo       `json:"info"`
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(data, &loose) != nil {
		return Export{}, false
	}
	ex = Export{Info: loose.Info}
	for _, raw := range loose.Messages {
		var m struct {
			Info  MessageInfo     `json:"info"`
			Parts json.RawMessage `json:"parts"`
		}
		if json.Unmarshal(raw, &m) != nil {
			skip("message that did not decode")
			continue
		}
		parts, bad := kit.DecodeElems[Part](m.Parts)
		for range bad {
			skip("part that did not decode")
		}
		ex.Messages = append(ex.Messages, Message{Info: m.Info, Parts: parts})
	}
	return ex, true
}

// messageParts reads one message's parts in the order they happened. A
// tool part holds both the call and its result, but the results of a step
// come after everything the model produced in it: with parallel calls the
// model asked for all of them (after its thinking and text) before the
// first ran. So results wait until the step ends (a step-start part, the
// end of the message, or a part that began after they finished).
func messageParts(m Message, streaming bool, p *Parsed) []transcript.Message {
	model := m.Info.ModelID
	if model == "" && m.Info.Model != nil {
		model = m.Info.Model.ModelID
	}
	r := &partReader{role: m.Info.Role, model: model, summary: string(m.Info.Summary) == "true", streaming: streaming, p: p}
	created := ms(m.Info.Time.Created)
	for _, part := range m.Parts {
		at := created
		if part.Time != nil && part.Time.Start > 0 {
			at = ms(part.Time.Start)
			if r.resultsEnd > 0 && part.Time.Start > r.resultsEnd {
				r.flush()
			}
		}
		r.add(transcript.Message{Agent: Agent, NativeID: part.ID, Time: at}, part)
	}
	r.flush()
	return r.out
}

// partReader is messageParts' state: the messages read so far, and the
// results waiting for their step to end.
type partReader struct {
	role      string // the message's
	model     string
	summary   bool // the message is a compaction summary
	streaming bool
	p         *Parsed

	out, results []transcript.Message
	resultsEnd   int64 // latest end among the waiting results
}

// flush ends a step: its results follow what the model produced in it.
func (r *partReader) flush() {
	r.out, r.results, r.resultsEnd = append(r.out, r.results...), nil, 0
}

// add reads one part; base is its message so far.
func (r *partReader) add(base transcript.Message, part Part) {
	switch part.Type {
	case "step-start":
		r.flush()
	case "text":
		if part.Ignored || strings.TrimSpace(part.Text) == "" || unfinished(part, r.streaming) {
			return
		}
		r.out = append(r.out, textMessage(base, r.role, part, r.model, r.summary))
	case "reasoning":
		if strings.TrimSpace(part.Text) == "" || unfinished(part, r.streaming) {
			return
		}
		base.Kind, base.Text, base.Model = transcript.KindThinking, part.Text, r.model
		r.out = append(r.out, base)
	case "file":
		r.file(base, part)
	case "tool":
		r.tool(base, part)
	default:
		if !bookkeepingParts[part.Type] {
			r.p.skip(cmp.Or(part.Type, "untyped") + " part")
		}
	}
}

// file reads a file part: a picture the user sent, or a placeholder.
func (r *partReader) file(base transcript.Message, part Part) {
	im, err := kit.ParseDataURL(part.URL)
	if err != nil || r.role != "user" {
		r.out = append(r.out, filePlaceholder(base, r.role, part))
		return
	}
	if kit.AttachImage(r.out, im) {
		return
	}
	base.Kind, base.Images = transcript.KindUser, []transcript.Image{im}
	r.out = append(r.out, base)
}

// tool reads a tool part: its call now, its result (with the pictures
// attached to it) when the step ends.
func (r *partReader) tool(base transcript.Message, part Part) {
	if part.State != nil && part.State.Status == "pending" {
		// The model is still streaming its input ({} until it
		// runs): the call is read once it has one, else it would
		// be kept twice, with no input and with its input.
		return
	}
	call, res := toolMessages(base, part, r.model)
	if call == nil {
		r.p.skip("tool part without a call id, tool or state")
		return
	}
	r.out = append(r.out, *call)
	for _, a := range part.State.Attachments {
		im, err := kit.ParseDataURL(a.URL)
		if err != nil || res == nil {
			r.p.skip(attachmentKind(a))
			continue
		}
		res.Images = append(res.Images, im)
	}
	if res != nil {
		r.results = append(r.results, *res)
		if st := part.State.Time; st != nil && st.End > r.resultsEnd {
			r.resultsEnd = st.End
		}
	}
}

// filePlaceholder stands for an attached image or file: its data stays
// out of cast, but the conversation keeps that it was there.
func filePlaceholder(base transcript.Message, role string, part Part) transcript.Message {
	what := "file"
	if strings.HasPrefix(part.Mime, "image/") {
		what = "image"
	}
	var about []string
	for _, s := range []string{part.Filename, part.Mime} {
		if s = strings.TrimSpace(s); s != "" {
			about = append(about, s)
		}
	}
	base.Text = "[" + what + " omitted]"
	if len(about) > 0 {
		base.Text = "[" + what + " omitted: " + strings.Join(about, ", ") + "]"
	}
	base.Kind = transcript.KindUser
	if role == "assistant" {
		base.Kind = transcript.KindAssistant
	}
	return base
}

// attachmentKind names a file a tool returned with its output (an image a
// read tool loaded), which cast does not carry.
func attachmentKind(a Part) string {
	if strings.HasPrefix(a.Mime, "image/") {
		return "image attachment of a tool result"
	}
	return "file attachment of a tool result"
}

func textMessage(base transcript.Message, role string, part Part, model string, summary bool) transcript.Message {
	// The cast notices the writer puts in synthetic user parts come back
	// as notices, not as something the user said.
	if typ, text, ok := kit.CastNotice.Unwrap(part.Text); ok && part.Synthetic {
		base.Kind, base.NoticeType, base.Text = transcript.KindNotice, typ, text
		return base
	}
	base.Text = part.Text
	switch {
	case role == "user":
		base.Kind = transcript.KindUser
	case summary:
		// A compaction's summary stands for the history before it.
		base.Kind, base.NoticeType = transcript.KindNotice, transcript.NoticeCompactionSummary
	default:
		base.Kind, base.Model = transcript.KindAssistant, model
	}
	return base
}

// toolMessages splits a tool part into the call and, once the tool
// finished, its result (nil while pending or running).
func toolMessages(base transcript.Message, part Part, model string) (call, res *transcript.Message) {
	if part.CallID == "" || part.Tool == "" || part.State == nil {
		return nil, nil
	}
	st := part.State
	c := base
	c.Kind, c.Model = transcript.KindToolCall, model
	c.ToolCall = &transcript.ToolCall{ID: part.CallID, Name: part.Tool, Input: inputText(st.Input)}
	if st.Time != nil && st.Time.Start > 0 && part.Time == nil {
		c.Time = ms(st.Time.Start)
	}
	r := base
	r.Kind, r.NativeID = transcript.KindToolResult, part.ID+"#result"
	if st.Time != nil && st.Time.End > 0 {
		r.Time = ms(st.Time.End)
	}
	switch st.Status {
	case "completed":
		r.ToolResult = &transcript.ToolResult{CallID: part.CallID, Output: st.Output, ExitCode: exitOf(st.Metadata)}
	case "error":
		r.ToolResult = &transcript.ToolResult{CallID: part.CallID, Output: st.Error, IsError: true, ExitCode: exitOf(st.Metadata)}
	default:
		return &c, nil
	}
	return &c, &r
}

// inputText is a tool's input as compact JSON text (exports are indented).
func inputText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// exitOf reads the exit code OpenCode's bash tool records in its metadata.
func exitOf(meta json.RawMessage) *int32 {
	var m struct {
		Exit *float64 `json:"exit"`
	}
	if len(meta) == 0 || json.Unmarshal(meta, &m) != nil || m.Exit == nil {
		return nil
	}
	c := int32(*m.Exit)
	return &c
}
