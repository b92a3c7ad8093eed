package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name recorded on neutral messages read from Gemini CLI.
const Agent = "gemini"

// Reader reads a Gemini CLI session file (JSONL or legacy JSON). The file
// is read as a stream, never whole: sessions of hundreds of MB exist,
// mostly answers the CLI rewrote, and only the last version of each
// message is kept.
type Reader struct {
	kit.FileReader[sessionFile, Decoded]
}

// ReadCwd implements agents.CwdReader. A session file does not name its
// folder; the project folder it sits in (<slug>/chats/<file>, a
// subagent's <slug>/chats/<parent>/<file>) does, in its ownership marker.
// "" when there is none.
func (Reader) ReadCwd(path string) (string, error) {
	chats := filepath.Dir(path)
	if filepath.Base(filepath.Dir(chats)) == "chats" {
		chats = filepath.Dir(chats) // a subagent's file, in its parent's folder
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(chats), projectRootFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(data)), err
}

// Decoded is everything a reader got out of one session file. What it
// left out (Kinds) are malformed lines and the line shapes and record
// types of other versions.
type Decoded struct {
	kit.Decoding
	SessionID string
	Kind      string // the header's kind: "main", or "subagent"
	Skipped   int    // lines that were not JSON or not a known record
}

func (d *Decoded) skip(kind string) { d.Kinds.Add(kind) }

// uiRecords are the record types the CLI shows but never sends to the
// model; they are known, so not reported as skipped.
var uiRecords = map[string]bool{"info": true, "error": true, "warning": true}

// Decode replays session file content; see DecodeFrom.
func Decode(data []byte) (Decoded, error) {
	return DecodeFrom(bytes.NewReader(data))
}

// sessionFile is the format Reader reads (DecodeFrom).
type sessionFile struct{}

func (sessionFile) Decode(r io.ReadSeeker) (Decoded, error) { return DecodeFrom(r) }

// DecodeFrom replays a session file read from r. Malformed lines are
// skipped and counted; it fails only when no line at all could be used
// (or r fails). It is ReadEach keeping what it reads, in one pass.
func DecodeFrom(r io.ReadSeeker) (Decoded, error) {
	var d Decoded
	ra, size, err := readerAt(r)
	if err != nil {
		return d, err
	}
	err = decodeEach(ra, size, true, &d, func(m transcript.Message) error {
		d.Messages = append(d.Messages, m)
		return nil
	})
	return d, err
}

// ReadEach implements agents.StreamReader. Gemini writes a record again,
// complete, under its id as it streams, and may rewind or replace them
// all, so a record's last version and place are known only at the end:
// a first pass keeps only where each record's last version is (a line,
// or an element of one), and a second reads them again one at a time
// for their messages; neither the file nor its records or messages are
// ever all in memory.
func (Reader) ReadEach(r io.ReaderAt, size int64, each func(transcript.Message) error) error {
	var d Decoded
	return decodeEach(r, size, false, &d, each)
}

// decodeEach replays the session in r's first size bytes and hands each
// of its messages to each, in order; d gets what the file says of itself
// and what was left out. keep holds the records as the first pass reads
// them (one pass, for a caller that keeps every message anyway).
func decodeEach(r io.ReaderAt, size int64, keep bool, d *Decoded, each func(transcript.Message) error) error {
	l, err := replay(r, size, keep, d.skip)
	d.SessionID, d.Skipped, d.Kind = l.sid, l.skipped, l.kind
	if err != nil {
		return err
	}
	if l.used == 0 {
		return errors.New("gemini: no session header or message found")
	}
	n := newNeutral(d.skip)
	if err := l.records(r, size, func(rec record) error { return n.add(rec, each) }); err != nil {
		return err
	}
	return n.flush(each)
}

// readerAt is r as an io.ReaderAt (a file or bytes.Reader is one; any
// other is read whole) and its size.
func readerAt(r io.ReadSeeker) (io.ReaderAt, int64, error) {
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, err
	}
	if ra, ok := r.(io.ReaderAt); ok {
		return ra, size, nil
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	b, err := io.ReadAll(r)
	return bytes.NewReader(b), int64(len(b)), err
}

// kindNameless is a tool call the reader cannot keep: no tool to name.
const kindNameless = "tool call without a name"

// neutral maps replayed records to neutral messages, a record at a time
// in their order (a result is paired with its call across records).
// UI-only records (info, error, warning) and context the CLI regenerates
// are left out.
type neutral struct {
	results map[string]bool // call ids whose result is already out
	ids     *callIDs
	skip    func(kind string)
	out     []transcript.Message // one record's
	// responded: the last turn was a user record holding a tool's
	// response, after which the CLI may put its own closing turn
	// (closesInterrupted).
	responded bool
	// held is a user text add holds back until the next record says
	// whether it is the summary of a compressed history (compressionAck).
	held *transcript.Message
	// when is the time of the record being read (record parses it once,
	// for every message put makes of it).
	when time.Time
}

// compressionAck is the model turn Gemini puts, with no model, after the
// user record it compresses the older part of a long history into: that
// record is a compaction summary, and the turn is not conversation. Read
// as a user's message, the summary left the session looking as if it had
// lost the history it summarised.
const compressionAck = "Got it. Thanks for the additional context!"

func newNeutral(skip func(kind string)) *neutral {
	return &neutral{results: map[string]bool{}, ids: newCallIDs(), skip: skip}
}

// add hands r's messages to each, a user text once the next record is
// known (held).
func (n *neutral) add(r record, each func(transcript.Message) error) error {
	n.out = n.out[:0]
	n.record(r)
	out := n.out
	if n.held != nil {
		m := *n.held
		n.held = nil
		if r.Type == "gemini" && r.Model == "" && len(out) == 1 && out[0].Kind == transcript.KindAssistant && out[0].Text == compressionAck {
			m.Kind, m.NoticeType, out = transcript.KindNotice, transcript.NoticeCompactionSummary, nil
		}
		if err := each(m); err != nil {
			return err
		}
	}
	if r.Type == "user" && len(out) == 1 && out[0].Kind == transcript.KindUser && len(out[0].Images) == 0 {
		m := out[0]
		n.held = &m
		return nil
	}
	for _, m := range out {
		if err := each(m); err != nil {
			return err
		}
	}
	return nil
}

// flush hands out what add holds back.
func (n *neutral) flush(each func(transcript.Message) error) error {
	if n.held == nil {
		return nil
	}
	m := *n.held
	n.held = nil
	return each(m)
}

// record turns r into its neutral messages (n.out).
func (n *neutral) record(r record) {
	n.when = kit.ParseTime(r.Timestamp)
	parts := parseContent(r.Content, n.skip)
	switch r.Type {
	case "user":
		n.user(r, parts)
	case "gemini":
		toolCalls := n.answer(r, parts)
		n.toolCalls(r, toolCalls)
		n.responded = false
	default:
		if !uiRecords[r.Type] {
			n.skip(r.Type + " record")
		}
	}
}

// put adds m, a message of r, to n.out under the agent, r's model, the
// record's time (n.when) and r's id (suffixed).
func (n *neutral) put(r record, m transcript.Message, suffix string) {
	m.Agent, m.Model, m.Time = Agent, r.Model, n.when
	m.NativeID = r.ID + suffix
	n.out = append(n.out, m)
}

// user reads a user record: tool results, and the user's text and images
// (or a cast notice).
func (n *neutral) user(r record, parts []part) {
	var texts []string
	var images []transcript.Image
	// An image after a functionResponse is that result's picture (as
	// Gemini records a read tool's, and repeats it in the "<id>_response"
	// record of its own rewrite): it goes with the result, or nowhere
	// when the result was read already, never into a user message.
	inResponse, result := false, -1 // result: index in n.out of the result read here
	for _, p := range parts {
		im, isImage := p.image()
		switch {
		case p.FunctionResponse != nil:
			inResponse, result = true, -1
			fr := p.FunctionResponse
			id, ok := fr.ID, true
			if id == "" {
				id, ok = n.ids.answer(fr.Name, n.results)
			}
			if !ok {
				n.skip("tool result without an id")
				continue
			}
			if n.results[id] {
				continue // the same result, also under its call
			}
			n.results[id] = true
			out2, isErr := responseText(fr.Response)
			n.put(r, transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: out2, IsError: isErr}}, "#result:"+id)
			result = len(n.out) - 1
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case isImage && inResponse:
			if result >= 0 {
				n.out[result].Images = append(n.out[result].Images, im)
			}
		case isImage:
			images = append(images, im)
		default:
			n.skip(p.leftOut())
		}
	}
	n.responded = inResponse
	text := strings.Join(texts, "\n")
	if regenerated(text) {
		return
	}
	if typ, body, ok := kit.CastNotice.Unwrap(text); ok {
		n.put(r, transcript.Message{Kind: transcript.KindNotice, NoticeType: typ, Text: body}, "")
	} else if len(texts) > 0 || len(images) > 0 {
		n.put(r, transcript.Message{Kind: transcript.KindUser, Text: Unescape(text), Images: images}, "")
	}
}

// answer reads a model record's thoughts, text and the calls its content
// holds, and returns r.ToolCalls when they are the record's calls (nil
// when content already holds them, as the full API turn).
func (n *neutral) answer(r record, parts []part) []toolCall {
	// Like the CLI: calls or thoughts inside content mean content is
	// already the full API turn, and thoughts/toolCalls only repeat it.
	apiParts := false
	for _, p := range parts {
		apiParts = apiParts || p.FunctionCall != nil || p.Thought
	}
	thoughts, toolCalls := r.Thoughts, r.ToolCalls
	if apiParts {
		thoughts, toolCalls = nil, nil
	}
	for i, t := range thoughts {
		n.put(r, transcript.Message{Kind: transcript.KindThinking, Text: thoughtText(t)}, fmt.Sprintf("#thought%d", i))
	}
	var texts []string
	for i, p := range parts {
		switch {
		case p.Text != nil && p.Thought:
			n.put(r, transcript.Message{Kind: transcript.KindThinking, Text: *p.Text}, fmt.Sprintf("#part%d", i))
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case p.FunctionCall != nil && p.FunctionCall.Name != "":
			fc := p.FunctionCall
			id := n.ids.call(fc.ID, fc.Name, r.ID, "part", i)
			n.put(r, transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: fc.Name, Input: kit.CompactJSON(fc.Args)}}, "#call:"+id)
		case p.FunctionCall != nil:
			n.skip(kindNameless)
		default:
			n.skip(p.leftOut())
		}
	}
	if text := strings.Join(texts, ""); text != "" && !n.closesInterrupted(r, text) {
		n.put(r, transcript.Message{Kind: transcript.KindAssistant, Text: text}, "#text")
	}
	return toolCalls
}

// toolCalls reads r.ToolCalls: the calls themselves when toolCalls (the
// record's, from answer) is not nil, and the results recorded with them.
func (n *neutral) toolCalls(r record, toolCalls []toolCall) {
	// The ids of r.ToolCalls: made here for the calls it holds, or
	// (when content holds the calls) those of the calls they answer.
	tcIDs := make([]string, len(r.ToolCalls))
	for i, tc := range r.ToolCalls {
		switch {
		case tc.Name == "":
			if toolCalls != nil {
				n.skip(kindNameless)
			}
		case toolCalls != nil:
			tcIDs[i] = n.ids.call(tc.ID, tc.Name, r.ID, "call", i)
			n.put(r, transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: tcIDs[i], Name: tc.Name, Input: kit.CompactJSON(tc.Args)}}, "#call:"+tcIDs[i])
		case tc.ID != "":
			tcIDs[i] = tc.ID
		default:
			tcIDs[i], _ = n.ids.answer(tc.Name, n.results)
		}
	}
	for i, tc := range r.ToolCalls {
		id := tcIDs[i]
		if id == "" || len(tc.Result) == 0 || string(tc.Result) == "null" || n.results[id] {
			continue
		}
		n.results[id] = true
		text, images, isErr := resultContent(tc.Result, n.skip)
		isErr = isErr || tc.Status == "error" || tc.Status == "cancelled"
		n.put(r, transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: text, IsError: isErr}, Images: images}, "#result:"+id)
	}
}

// closesInterrupted reports whether a model record of text is the turn
// the CLI makes up to close an interrupted one (interruptedPlaceholder):
// it puts it right after a user record holding a tool's response, and
// records it with no model. A model's answer of the same text has the
// model that gave it; only once a resume has written the session anew
// (new ids, no models) and the answer followed a tool's response is it
// taken for the CLI's turn.
func (n *neutral) closesInterrupted(r record, text string) bool {
	return n.responded && r.Model == "" && text == interruptedPlaceholder
}

// parseContent accepts the three shapes Gemini stores: a string, one Part,
// or a Part list; skip is told of each part that does not decode.
func parseContent(raw json.RawMessage, skip func(kind string)) []part {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	const bad = "content part that did not decode"
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []part{{Text: &s}}
		}
	case '{':
		var p part
		if json.Unmarshal(raw, &p) == nil {
			return []part{p}
		}
	case '[':
		parts, n := kit.DecodeElems[part](raw)
		for range n {
			skip(bad)
		}
		return parts
	}
	skip(bad)
	return nil
}

// resultContent flattens a toolCalls[].result into text and the images
// it holds (a screenshot a read tool returned); skip is told of the parts
// it leaves out.
func resultContent(raw json.RawMessage, skip func(kind string)) (string, []transcript.Image, bool) {
	parts := parseContent(raw, skip)
	var texts []string
	var images []transcript.Image
	isErr := false
	for _, p := range parts {
		im, isImage := p.image()
		switch {
		case p.FunctionResponse != nil:
			t, e := responseText(p.FunctionResponse.Response)
			texts = append(texts, t)
			isErr = isErr || e
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case isImage:
			images = append(images, im)
		default:
			skip(p.leftOut())
		}
	}
	return strings.Join(texts, "\n"), images, isErr
}

// responseText takes "output" (or "error") out of a functionResponse
// response, and keeps any other shape as JSON text.
func responseText(raw json.RawMessage) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		var s string
		if len(obj) == 1 {
			if v, ok := obj["output"]; ok && json.Unmarshal(v, &s) == nil {
				return s, false
			}
			if v, ok := obj["error"]; ok && json.Unmarshal(v, &s) == nil {
				return s, true
			}
		}
	}
	return kit.CompactJSON(raw), false
}

func thoughtText(t thought) string {
	// The CLI's own rendering when it replays thoughts.
	if t.Subject == "" {
		return t.Description
	}
	return "**" + t.Subject + "** " + t.Description
}

var _ agents.StreamReader = Reader{}
