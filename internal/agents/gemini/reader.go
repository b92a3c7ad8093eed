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

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name recorded on neutral messages read from Gemini CLI.
const Agent = "gemini"

// Reader reads a Gemini CLI session file (JSONL or legacy JSON).
type Reader struct{}

// Read implements agents.Reader.
func (Reader) Read(path string) ([]transcript.Message, error) {
	return kit.ReadFile(path, DecodeFrom)
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

// Decoded is everything a reader got out of one session file.
type Decoded struct {
	Messages  []transcript.Message
	SessionID string
	Kind      string // the header's kind: "main", or "subagent"
	Skipped   int    // lines that were not JSON or not a known record
	// Kinds counts what was left out because the reader does not know it
	// (malformed lines, line shapes and record types of other versions),
	// for the import report.
	Kinds kit.Skips
}

func (d *Decoded) skip(kind string) { d.Kinds.Add(kind) }

// Report implements kit.Decoded.
func (d Decoded) Report() ([]transcript.Message, kit.Skips) { return d.Messages, d.Kinds }

// ReadReport implements agents.ReportingReader. The file is read as a
// stream, never whole: sessions of hundreds of MB exist, mostly answers
// the CLI rewrote, and only the last version of each message is kept.
func (Reader) ReadReport(path string) ([]transcript.Message, map[string]int, error) {
	return kit.ReportFile(path, DecodeFrom)
}

// uiRecords are the record types the CLI shows but never sends to the
// model; they are known, so not reported as skipped.
var uiRecords = map[string]bool{"info": true, "error": true, "warning": true}

// Decode replays session file content; see DecodeFrom.
func Decode(data []byte) (Decoded, error) {
	return DecodeFrom(bytes.NewReader(data))
}

// DecodeFrom replays a session file read from r. Malformed lines are
// skipped and counted; it fails only when no line at all could be used
// (or r fails).
func DecodeFrom(r io.ReadSeeker) (Decoded, error) {
	var d Decoded
	l, err := replay(r, d.skip)
	d.SessionID, d.Skipped, d.Kind = l.sid, l.skipped, l.kind
	if err != nil {
		return d, err
	}
	if l.used == 0 {
		return d, errors.New("gemini: no session header or message found")
	}
	d.Messages = toNeutral(l.recs, d.skip)
	return d, nil
}

// replay turns the event log into the final ordered message list, as the
// CLI itself does on load; skip is told what it leaves out.
func replay(r io.ReadSeeker, skip func(kind string)) (lineReplay, error) {
	// The legacy format is one JSON object holding every message.
	if legacy, ok := readLegacy(r); ok {
		return lineReplay{recs: legacy.Messages, sid: legacy.SessionID, kind: legacy.Kind, used: 1}, nil
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return lineReplay{}, err
	}
	l := lineReplay{index: map[string]int{}, skip: skip}
	err := kit.EachLine(r, l.line)
	return l, err
}

// lineReplay replays a JSONL session a line at a time.
type lineReplay struct {
	recs          []record
	index         map[string]int
	sid           string
	kind          string // the header's: "main", or "subagent" for a run another session started
	used, skipped int
	skip          func(kind string)
}

func (l *lineReplay) reindex() {
	clear(l.index)
	for i, r := range l.recs {
		l.index[r.ID] = i
	}
}

// upsert: records are upserts: a streamed answer is written again,
// complete, under the same id, and keeps its first position.
func (l *lineReplay) upsert(r record) {
	if i, ok := l.index[r.ID]; ok {
		l.recs[i] = r
		return
	}
	l.index[r.ID] = len(l.recs)
	l.recs = append(l.recs, r)
}

func (l *lineReplay) bad(kind string) {
	l.skipped++
	l.skip(kind)
}

func (l *lineReplay) line(line []byte) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil {
		l.bad("malformed line")
		return
	}
	// Same precedence as the CLI's loader: rewind, message, $set, header.
	switch {
	case isString(obj["$rewindTo"]):
		var id string
		_ = json.Unmarshal(obj["$rewindTo"], &id)
		if i, ok := l.index[id]; ok {
			l.recs = l.recs[:i]
		} else {
			l.recs = nil // the CLI clears everything on an unknown target
		}
		l.reindex()
	case isString(obj["id"]):
		var r record
		if json.Unmarshal(line, &r) != nil || r.ID == "" {
			l.bad("message record that did not decode")
			return
		}
		l.upsert(r)
	case len(obj["$set"]) > 0 && obj["$set"][0] == '{':
		var set struct {
			SessionID string    `json:"sessionId"`
			Messages  *[]record `json:"messages"`
		}
		if json.Unmarshal(obj["$set"], &set) != nil {
			l.bad("$set record that did not decode")
			return
		}
		if set.SessionID != "" {
			l.sid = set.SessionID
		}
		if set.Messages != nil {
			l.recs = nil
			l.reindex()
			l.upsertAll(*set.Messages)
		}
	case isString(obj["sessionId"]):
		var h header
		if json.Unmarshal(line, &h) != nil {
			l.bad("session header that did not decode")
			return
		}
		l.sid, l.kind = h.SessionID, h.Kind
		l.upsertAll(h.Messages)
	default:
		l.bad("line of an unknown shape")
		return
	}
	l.used++
}

// upsertAll upserts recs; one without an id cannot be placed (records are
// found by id) and is counted.
func (l *lineReplay) upsertAll(recs []record) {
	for _, r := range recs {
		if r.ID == "" {
			l.skip("message without an id")
			continue
		}
		l.upsert(r)
	}
}

// kindNameless is a tool call the reader cannot keep: no tool to name.
const kindNameless = "tool call without a name"

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

// toNeutral maps replayed records to neutral messages. UI-only records
// (info, error, warning) and context the CLI regenerates are left out.
func toNeutral(recs []record, skip func(kind string)) []transcript.Message {
	var out []transcript.Message
	results := map[string]bool{} // call ids whose result is already out
	ids := newCallIDs()
	for _, r := range recs {
		base := transcript.Message{Agent: Agent, Model: r.Model, Time: kit.ParseTime(r.Timestamp)}
		add := func(m transcript.Message, suffix string) {
			m.Agent, m.Model, m.Time = base.Agent, base.Model, base.Time
			m.NativeID = r.ID + suffix
			out = append(out, m)
		}
		parts := parseContent(r.Content, skip)
		switch r.Type {
		case "user":
			var texts []string
			var images []transcript.Image
			for _, p := range parts {
				im, isImage := p.image()
				switch {
				case p.FunctionResponse != nil:
					fr := p.FunctionResponse
					id, ok := fr.ID, true
					if id == "" {
						id, ok = ids.answer(fr.Name, results)
					}
					if !ok {
						skip("tool result without an id")
						continue
					}
					if results[id] {
						continue // the same result, also under its call
					}
					results[id] = true
					out2, isErr := responseText(fr.Response)
					add(transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: out2, IsError: isErr}}, "#result:"+id)
				case p.Text != nil:
					texts = append(texts, *p.Text)
				case isImage:
					images = append(images, im)
				default:
					skip(p.leftOut())
				}
			}
			text := strings.Join(texts, "\n")
			if regenerated(text) {
				continue
			}
			if typ, body, ok := kit.CastNotice.Unwrap(text); ok {
				add(transcript.Message{Kind: transcript.KindNotice, NoticeType: typ, Text: body}, "")
			} else if len(texts) > 0 || len(images) > 0 {
				add(transcript.Message{Kind: transcript.KindUser, Text: Unescape(text), Images: images}, "")
			}
		case "gemini":
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
				add(transcript.Message{Kind: transcript.KindThinking, Text: thoughtText(t)}, fmt.Sprintf("#thought%d", i))
			}
			var texts []string
			for i, p := range parts {
				switch {
				case p.Text != nil && p.Thought:
					add(transcript.Message{Kind: transcript.KindThinking, Text: *p.Text}, fmt.Sprintf("#part%d", i))
				case p.Text != nil:
					texts = append(texts, *p.Text)
				case p.FunctionCall != nil && p.FunctionCall.Name != "":
					fc := p.FunctionCall
					id := ids.call(fc.ID, fc.Name, r.ID, "part", i)
					add(transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: fc.Name, Input: kit.CompactJSON(fc.Args)}}, "#call:"+id)
				case p.FunctionCall != nil:
					skip(kindNameless)
				default:
					skip(p.leftOut())
				}
			}
			if text := strings.Join(texts, ""); text != "" {
				add(transcript.Message{Kind: transcript.KindAssistant, Text: text}, "#text")
			}
			// The ids of r.ToolCalls: made here for the calls it holds, or
			// (when content holds the calls) those of the calls they answer.
			tcIDs := make([]string, len(r.ToolCalls))
			for i, tc := range r.ToolCalls {
				switch {
				case tc.Name == "":
					if toolCalls != nil {
						skip(kindNameless)
					}
				case toolCalls != nil:
					tcIDs[i] = ids.call(tc.ID, tc.Name, r.ID, "call", i)
					add(transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: tcIDs[i], Name: tc.Name, Input: kit.CompactJSON(tc.Args)}}, "#call:"+tcIDs[i])
				case tc.ID != "":
					tcIDs[i] = tc.ID
				default:
					tcIDs[i], _ = ids.answer(tc.Name, results)
				}
			}
			for i, tc := range r.ToolCalls {
				id := tcIDs[i]
				if id == "" || len(tc.Result) == 0 || string(tc.Result) == "null" || results[id] {
					continue
				}
				results[id] = true
				text, images, isErr := resultContent(tc.Result, skip)
				isErr = isErr || tc.Status == "error" || tc.Status == "cancelled"
				add(transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: text, IsError: isErr}, Images: images}, "#result:"+id)
			}
		default:
			if !uiRecords[r.Type] {
				skip(r.Type + " record")
			}
		}
	}
	return out
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
