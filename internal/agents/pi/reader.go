package pi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name recorded on neutral messages read from pi.
const Agent = "pi"

// noticeType marks the custom entries cast writes for its notices; they
// are not in pi's model context and are not read back as conversation.
const noticeType = "cast-notice"

// Reader reads a pi session file.
type Reader struct {
	kit.CwdFileReader[sessionFile, Decoded]
}

// Decoded is everything a reader got out of one session file. What it
// left out (Kinds) are malformed lines and the entry types, roles and
// blocks of other pi versions.
type Decoded struct {
	kit.Decoding
	SessionID string
	Cwd       string
	Skipped   int // lines that were not JSON or not a known record
	// runs are the subagents' runs the conversation's tool results keep
	// (ReadRuns).
	runs []agents.Run
}

func (d *Decoded) skip(kind string) { d.Kinds.Add(kind) }

// knownEntries are the entry types pi writes that carry no conversation of
// their own (settings changes, labels, extension data such as cast's
// notices); they are not reported as skipped.
var knownEntries = map[string]bool{"model_change": true, "thinking_level_change": true, "label": true, "custom": true, "session_info": true}

// Decode reads the conversation pi would resume: the chain from the last
// entry back to the root. Entries on abandoned branches are not part of it.
// Malformed lines are skipped and counted; it fails only when no line at all
// could be used.
func Decode(data []byte) (Decoded, error) {
	return DecodeFrom(bytes.NewReader(data))
}

// sessionFile is the format Reader reads: DecodeFrom, and the session
// header's cwd.
type sessionFile struct{}

func (sessionFile) Decode(r io.ReadSeeker) (Decoded, error) { return DecodeFrom(r) }
func (sessionFile) Cwd(d Decoded) string                    { return d.Cwd }

// DecodeFrom is Decode reading r a line at a time.
func DecodeFrom(r io.ReadSeeker) (Decoded, error) {
	var d Decoded
	var entries []entry
	used := 0
	bad := func() {
		d.Skipped++
		d.skip("malformed line")
	}
	err := kit.EachLine(r, func(line []byte) {
		var probe struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &probe) != nil || probe.Type == "" {
			bad()
			return
		}
		if probe.Type == "session" {
			var h header
			if json.Unmarshal(line, &h) != nil {
				d.Skipped++
				d.skip("session header that did not decode")
				return
			}
			d.SessionID, d.Cwd = h.ID, h.Cwd
			used++
			return
		}
		var e entry
		if json.Unmarshal(line, &e) != nil {
			// A known type with a field of another JSON type: a decoding
			// failure, named by what the line was.
			d.Skipped++
			d.skip(probe.Type + " entry that did not decode")
			return
		}
		entries = append(entries, e)
		used++
	})
	if err != nil {
		return d, err
	}
	if used == 0 {
		return d, errors.New("pi: no session header or entry found")
	}
	path := chain(entries)
	for range conversational(entries) - conversational(path) {
		d.skip("entry of an abandoned branch")
	}
	for _, e := range path {
		d.Messages = append(d.Messages, toNeutral(e, d.skip)...)
		for _, run := range runsIn(e) {
			d.skip(kindRun) // left out of the conversation: ReadRuns reads it
			run.ParentNativeID = d.SessionID
			d.runs = append(d.runs, run)
		}
	}
	return d, nil
}

// conversational counts the entries that would carry conversation (every
// type but the known settings and extension entries).
func conversational(entries []entry) int {
	n := 0
	for _, e := range entries {
		if !knownEntries[e.Type] {
			n++
		}
	}
	return n
}

// chain returns the entries from the root to the leaf (the last entry with
// an id). Files from before ids existed (v1) are linear in file order.
func chain(entries []entry) []entry {
	byID := map[string]int{}
	leaf := -1
	for i, e := range entries {
		if e.ID != "" {
			byID[e.ID] = i
			leaf = i
		}
	}
	if leaf < 0 {
		return entries
	}
	var path []entry
	seen := map[int]bool{}
	for i := leaf; i >= 0 && !seen[i]; {
		seen[i] = true
		path = append(path, entries[i])
		p := entries[i].ParentID
		if p == nil || *p == "" {
			break
		}
		next, ok := byID[*p]
		if !ok {
			break // pi stops at a missing parent too
		}
		i = next
	}
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	return path
}

// toNeutral converts one entry; skip is told what it does not know.
func toNeutral(e entry, skip func(kind string)) []transcript.Message {
	c := &converted{id: e.ID, when: kit.ParseTime(e.Timestamp), skip: skip}
	switch e.Type {
	case "compaction":
		c.add(transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: e.Summary}, "")
	case "branch_summary":
		c.add(transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeFork, Text: e.Summary}, "")
	case "custom_message":
		if text := blocksText(e.Content, skip); text != "" {
			c.add(transcript.Message{Kind: transcript.KindUser, Text: text}, "")
		}
	case "message":
		if e.Message == nil {
			skip("message entry without a message")
			return nil
		}
		c.message(e.Message)
	default:
		if !knownEntries[e.Type] {
			skip(e.Type + " entry")
		}
	}
	return c.out
}

// converted is toNeutral's work on one entry: the messages made of it.
type converted struct {
	id   string    // the entry's, which the messages' native ids extend
	when time.Time // for messages without a time of their own
	skip func(kind string)
	out  []transcript.Message
}

// add appends m; suffix tells apart the messages of one entry.
func (c *converted) add(m transcript.Message, suffix string) {
	m.Agent, m.NativeID = Agent, c.id+suffix
	if m.Time.IsZero() {
		m.Time = c.when
	}
	c.out = append(c.out, m)
}

// message converts the message of a message entry, by its role.
func (c *converted) message(m *message) {
	if t := msgTime(m.Timestamp); !t.IsZero() && c.when.IsZero() {
		c.when = t
	}
	switch m.Role {
	case "user", "custom":
		text, images := blocksContent(m.Content, c.skip)
		c.add(transcript.Message{Kind: transcript.KindUser, Text: text, Images: images}, "")
	case "assistant":
		for i, b := range parseBlocks(m.Content, c.skip) {
			if n, ok := c.assistantBlock(m, b); ok {
				n.Model = m.Model
				c.add(n, fmt.Sprintf("#%d", i))
			}
		}
	case "toolResult":
		c.toolResult(m)
	case "bashExecution":
		// A command the user ran with "!": pi shows it to the model as
		// user text unless it was run with "!!".
		if !m.ExcludeFromContext {
			c.add(transcript.Message{Kind: transcript.KindUser, Text: bashText(m)}, "")
		}
	case "branchSummary":
		c.add(transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeFork, Text: m.Summary}, "")
	case "compactionSummary":
		c.add(transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: m.Summary}, "")
	default:
		c.skip(m.Role + " message")
	}
}

// assistantBlock is the message of one block of the assistant message m;
// false when the block carries none.
func (c *converted) assistantBlock(m *message, b block) (transcript.Message, bool) {
	switch b.Type {
	case "thinking":
		if b.Thinking == "" {
			return transcript.Message{}, false // redacted thinking carries nothing readable
		}
		text := b.Thinking
		if m.API == castAPI {
			text = strings.TrimSuffix(text, thinkingSep)
		}
		return transcript.Message{Kind: transcript.KindThinking, Text: text}, true
	case "text":
		return transcript.Message{Kind: transcript.KindAssistant, Text: b.Text}, true
	case "toolCall":
		if b.ID == "" || b.Name == "" {
			c.skip("tool call without an id or name")
			return transcript.Message{}, false
		}
		return transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: b.ID, Name: b.Name, Input: kit.CompactJSON(b.Arguments)}}, true
	default:
		c.skip(b.Type + " block")
		return transcript.Message{}, false
	}
}

// toolResult converts a toolResult message, with the exit code pi keeps
// in its details.
func (c *converted) toolResult(m *message) {
	if m.ToolCallID == "" {
		c.skip("tool result without a call id")
		return
	}
	text, images := blocksContent(m.Content, c.skip)
	r := &transcript.ToolResult{CallID: m.ToolCallID, Output: text, IsError: m.IsError != nil && *m.IsError}
	var det struct {
		ExitCode *int32 `json:"exitCode"`
	}
	if json.Unmarshal(m.Details, &det) == nil {
		r.ExitCode = det.ExitCode
	}
	c.add(transcript.Message{Kind: transcript.KindToolResult, ToolResult: r, Images: images}, "")
}

// parseBlocks reads content that is a string or a block list; skip is
// told of each block that does not decode.
func parseBlocks(raw json.RawMessage, skip func(kind string)) []block {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	const bad = "content block that did not decode"
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			skip(bad)
			return nil
		}
		return []block{{Type: "text", Text: s}}
	}
	if raw[0] != '[' {
		skip(bad)
		return nil
	}
	blocks, n := kit.DecodeElems[block](raw)
	for range n {
		skip(bad)
	}
	return blocks
}

// blocksText joins the text of user-side content (blocksContent without
// its images).
func blocksText(raw json.RawMessage, skip func(kind string)) string {
	text, _ := blocksContent(raw, skip)
	return text
}

// blocksContent is user-side content's text and images; an image without
// bytes any API takes is named in the text and told to skip, as are
// blocks of other types.
func blocksContent(raw json.RawMessage, skip func(kind string)) (string, []transcript.Image) {
	var parts []string
	var images []transcript.Image
	for _, b := range parseBlocks(raw, skip) {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "image":
			if im, err := kit.DecodeImage(b.MimeType, b.Data); err == nil {
				images = append(images, im)
				continue
			}
			skip(kit.SkipImage)
			parts = append(parts, "[image: "+b.MimeType+"]")
		default:
			skip(cmp.Or(b.Type, "untyped") + " block")
		}
	}
	return strings.Join(parts, "\n"), images
}

// bashText is pi's bashExecutionToText, the text the model sees.
func bashText(m *message) string {
	s := "Ran `" + m.Command + "`\n"
	if m.Output != "" {
		s += "```\n" + m.Output + "\n```"
	} else {
		s += "(no output)"
	}
	if m.Cancelled {
		s += "\n\n(command cancelled)"
	} else if m.ExitCode != nil && *m.ExitCode != 0 {
		s += fmt.Sprintf("\n\nCommand exited with code %d", *m.ExitCode)
	}
	return s
}

// msgTime reads a message timestamp: Unix ms, or ISO text.
func msgTime(raw json.RawMessage) time.Time {
	var ms int64
	if json.Unmarshal(raw, &ms) == nil && ms > 0 {
		return time.UnixMilli(ms).UTC()
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return kit.ParseTime(s)
	}
	return time.Time{}
}
