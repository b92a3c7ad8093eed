package claude

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// convert turns one record into neutral messages; skip is told each content
// block it leaves out that a reader of the report should hear of. ok is
// false when the record carries nothing for the conversation and nothing
// of it was reported through skip or is known to be unreadable (the caller
// then reports the record as a whole).
func convert(rec record, skip func(kind string)) ([]transcript.Message, bool) {
	if rec.Type == "system" && rec.Subtype == "local_command" {
		return localCommandOutput(rec)
	}
	if rec.Type != "user" && rec.Type != "assistant" {
		return nil, false
	}
	var m apiMessage
	if json.Unmarshal(rec.Message, &m) != nil {
		skip(rec.Type + " message that did not decode")
		return nil, true
	}
	c := &conversion{rec: rec, skip: skip, base: transcript.Message{Agent: Agent, NativeID: rec.UUID, Time: kit.ParseTime(rec.Timestamp)}}
	if rec.Type == "assistant" {
		return c.assistant(m)
	}
	return c.user(m)
}

// conversion is convert's state for one user or assistant record: the
// messages made of it so far, and whether what it left out was accounted
// for.
type conversion struct {
	rec       record
	skip      func(kind string)
	base      transcript.Message // what every message of the record carries
	out       []transcript.Message
	accounted bool // something left out was reported, or is known unreadable
}

// note reports a left-out block through skip.
func (c *conversion) note(kind string) { c.skip(kind); c.accounted = true }

// contentBlocks is a message's content as blocks; a block that does not
// decode is noted.
func (c *conversion) contentBlocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		// The API takes a string for any message's content.
		return []block{{Type: "text", Text: s}}
	}
	bs, bad := kit.DecodeElems[block](raw)
	for range bad {
		c.note(kindBadBlock)
	}
	return bs
}

// add appends msg; the record's second and later messages get ids of
// their own.
func (c *conversion) add(msg transcript.Message) {
	if len(c.out) > 0 {
		msg.NativeID = fmt.Sprintf("%s#%d", c.rec.UUID, len(c.out))
	}
	c.out = append(c.out, msg)
}

// assistant converts an assistant record: a message per block.
func (c *conversion) assistant(m apiMessage) ([]transcript.Message, bool) {
	// Synthetic turns ("No response requested.", API errors) were
	// written by the CLI, not said by a model.
	if m.Model == "<synthetic>" || c.rec.IsAPIErrorMessage {
		return nil, false
	}
	c.base.Model = m.Model
	for _, b := range c.contentBlocks(m.Content) {
		if msg, ok := c.assistantBlock(b); ok {
			c.add(msg)
		}
	}
	return c.out, len(c.out) > 0 || c.accounted
}

// assistantBlock is the message of one assistant block; false when the
// block carries none.
func (c *conversion) assistantBlock(b block) (transcript.Message, bool) {
	msg := c.base
	switch b.Type {
	case "text":
		if b.Text == "" {
			return msg, false
		}
		msg.Kind, msg.Text = transcript.KindAssistant, b.Text
	case "thinking":
		if b.Thinking == "" {
			// Signature only (newer CLIs store no text): nothing
			// readable to carry, so known, not reported.
			c.accounted = true
			return msg, false
		}
		msg.Kind, msg.Text = transcript.KindThinking, b.Thinking
	case "tool_use", "server_tool_use":
		msg.Kind = transcript.KindToolCall
		msg.ToolCall = &transcript.ToolCall{ID: b.ID, Name: b.Name, Input: compactJSON(b.Input)}
	default:
		if strings.HasSuffix(b.Type, "_tool_result") { // server tools (web search)
			msg.Kind = transcript.KindToolResult
			msg.ToolResult = &transcript.ToolResult{CallID: b.ToolUseID, Output: flatten(b.Content)}
		} else if b.Type == "redacted_thinking" {
			c.accounted = true // encrypted: nothing readable to carry
			return msg, false
		} else {
			c.note(cmp.Or(b.Type, "untyped") + " block")
			return msg, false
		}
	}
	return msg, true
}

// user converts a user record: injected context, a compaction summary,
// a prompt as typed, or a message per block.
func (c *conversion) user(m apiMessage) ([]transcript.Message, bool) {
	if c.rec.IsMeta {
		// Context the CLI injected (caveats, skill bodies) is regenerated on
		// resume, except cast's own notices.
		if typ, text, ok := noticeTag.Unwrap(flatten(m.Content)); ok && typ != omittedType {
			msg := c.base
			msg.Kind, msg.NoticeType, msg.Text = transcript.KindNotice, typ, text
			return []transcript.Message{msg}, true
		}
		return nil, false
	}
	if c.rec.IsCompactSummary {
		msg := c.base
		msg.Kind, msg.NoticeType = transcript.KindNotice, transcript.NoticeCompactionSummary
		msg.Text = flatten(m.Content)
		return []transcript.Message{msg}, true
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return c.prompt(s)
	}
	for _, b := range c.contentBlocks(m.Content) {
		if msg, ok := c.userBlock(b); ok {
			c.add(msg)
		}
	}
	return c.out, len(c.out) > 0 || c.accounted
}

// prompt converts a user record whose content is a string.
func (c *conversion) prompt(s string) ([]transcript.Message, bool) {
	// A string is the prompt as typed: kept verbatim, even where it
	// looks like markup Claude Code uses, but for a local command's
	// whole output, which Claude Code writes as a user record after a
	// compaction (the user never said it).
	if out, ok := commandOutput(s); ok {
		return localCommandNotice(c.rec, out)
	}
	if cmd := commandRecord.FindStringSubmatch(s); cmd != nil {
		// A slash command Claude Code ran: read as it was typed, so the
		// node finds the turn's prompt in it, arguments and all.
		s = strings.TrimSpace(cmd[1] + " " + cmd[2])
	}
	if strings.TrimSpace(s) != "" {
		msg := c.base
		msg.Kind, msg.Text = transcript.KindUser, s
		c.add(msg)
	}
	return c.out, len(c.out) > 0
}

// userBlock is the message of one user block; false when the block
// carries none (an image is attached to the message before it instead).
func (c *conversion) userBlock(b block) (transcript.Message, bool) {
	msg := c.base
	switch b.Type {
	case "text":
		if strings.TrimSpace(b.Text) == "" || injectedReminder(b.Text) {
			return msg, false
		}
		msg.Kind, msg.Text = transcript.KindUser, b.Text
		if out, ok := commandOutput(b.Text); ok {
			msg.Kind, msg.NoticeType, msg.Text = transcript.KindNotice, transcript.NoticeCommandOutput, out
		}
	case "image":
		im, ok := blockImage(b, c.note)
		if !ok {
			msg.Kind, msg.Text = transcript.KindUser, "[image omitted]"
			break
		}
		if kit.AttachImage(c.out, im) {
			return msg, false
		}
		msg.Kind, msg.Images = transcript.KindUser, []transcript.Image{im}
	case "document":
		msg.Kind, msg.Text = transcript.KindUser, "[document omitted]"
	case "tool_result":
		out, images := resultContent(b.Content, c.note)
		res := &transcript.ToolResult{CallID: b.ToolUseID, Output: out, IsError: b.IsError}
		res.ExitCode = exitCode(out, b.IsError, c.rec.ToolUseResult)
		msg.Kind, msg.ToolResult, msg.Images = transcript.KindToolResult, res, images
	default:
		c.note(cmp.Or(b.Type, "untyped") + " block")
		return msg, false
	}
	return msg, true
}

// blocks reads a content block list; a single odd block (a string inside
// the list, say) does not lose its neighbours.
func blocks(raw json.RawMessage) []block { return kit.DecodeList[block](raw) }

// blockImage is an image block's picture; a URL or file reference, or
// bytes no API would take, is reported through note instead.
func blockImage(b block, note func(string)) (transcript.Image, bool) {
	if b.Source == nil || b.Source.Type != "base64" {
		note(kit.SkipImage)
		return transcript.Image{}, false
	}
	im, err := kit.DecodeImage(b.Source.MediaType, b.Source.Data)
	if err != nil {
		note(kit.SkipImage)
		return transcript.Image{}, false
	}
	return im, true
}

// resultContent is a tool_result's text (flatten) and the images it holds
// (a screenshot the Read tool took); an image it cannot carry keeps its
// placeholder in the text.
func resultContent(raw json.RawMessage, note func(string)) (string, []transcript.Image) {
	var images []transcript.Image
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	bs := blocks(raw)
	kept := bs[:0:0]
	for _, b := range bs {
		if b.Type == "image" {
			if im, ok := blockImage(b, note); ok {
				images = append(images, im)
				continue
			}
		}
		kept = append(kept, b)
	}
	if len(images) == 0 {
		return flatten(raw), nil
	}
	return flattenBlocks(kept), images
}

// flatten renders tool_result content (a string or a list of blocks) as
// text; non-text blocks leave a placeholder so their presence is not lost.
func flatten(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if bs := blocks(raw); len(bs) > 0 {
		return flattenBlocks(bs)
	}
	return compactJSON(raw)
}

// flattenBlocks renders blocks as text, a placeholder for each non-text
// block.
func flattenBlocks(bs []block) string {
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "":
		default:
			parts = append(parts, "["+b.Type+" omitted]")
		}
	}
	return strings.Join(parts, "\n")
}

var exitRE = regexp.MustCompile(`^(?:Error: )?Exit code (-?\d+)\b`)

// exitCode recovers a shell exit code where the transcript shows one: the
// Bash tool reports failures as "Exit code N" and success as a structured
// stdout/stderr result without an error flag.
func exitCode(out string, isErr bool, tur json.RawMessage) *int32 {
	if m := exitRE.FindStringSubmatch(out); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 32); err == nil {
			c := int32(n)
			return &c
		}
	}
	if isErr || len(tur) == 0 || tur[0] != '{' {
		return nil
	}
	var r struct {
		Stdout      *string `json:"stdout"`
		Interrupted bool    `json:"interrupted"`
	}
	if json.Unmarshal(tur, &r) == nil && r.Stdout != nil && !r.Interrupted {
		c := int32(0)
		return &c
	}
	return nil
}

var reminderRE = regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`)

// injectedReminder tells a text block Claude Code added (a context
// reminder: it stores these as text blocks of their own, holding nothing but
// <system-reminder> elements, and adds them again on every request) from
// text a person wrote. What a person typed is kept whole even where it
// contains such an element: Claude Code stores a typed prompt as a string,
// or, with an attachment, as a text block of its own that holds more.
func injectedReminder(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "<system-reminder>") && strings.TrimSpace(reminderRE.ReplaceAllString(t, "")) == ""
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// localCommandOutput reads what a command Claude Code ran itself printed (a
// slash command: /compact on a short conversation says "Not enough
// messages to compact." and calls no model) as a notice: it is all the
// user gets for that message, so leaving it out left the turn silent.
// A record without the output tags is the command as typed (one Claude
// Code does not run here, "/color red" in -p, is recorded so, before its
// output); Claude Code's own output tells them apart the same way. It
// reads as the user's, like a command record, so the node finds the
// turn's prompt in it.
func localCommandOutput(rec record) ([]transcript.Message, bool) {
	var s string
	if json.Unmarshal(rec.Content, &s) != nil {
		return nil, false
	}
	if !strings.Contains(s, stdoutOpen) && !strings.Contains(s, stderrOpen) {
		if s = strings.TrimSpace(s); s == "" {
			return nil, false
		}
		return []transcript.Message{{Kind: transcript.KindUser, Text: s,
			Agent: Agent, NativeID: rec.UUID, Time: kit.ParseTime(rec.Timestamp)}}, true
	}
	return localCommandNotice(rec, s)
}

// commandRecord is the user record Claude Code writes for a slash command
// it ran: its name and its arguments.
var commandRecord = regexp.MustCompile(`(?s)^\s*<command-name>([^<]*)</command-name>\s*<command-message>[^<]*</command-message>\s*<command-args>(.*?)</command-args>\s*$`)

// The tags around a local command's output.
const (
	stdoutOpen  = "<local-command-stdout>"
	stdoutClose = "</local-command-stdout>"
	stderrOpen  = "<local-command-stderr>"
)

// commandOutput is text's local command output when text is that output
// whole, in its tags.
func commandOutput(text string) (string, bool) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, stdoutOpen) || !strings.HasSuffix(t, stdoutClose) {
		return "", false
	}
	out := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, stdoutOpen), stdoutClose))
	return out, out != ""
}

// localCommandNotice is the notice of a local command's output s, its
// tags taken off.
func localCommandNotice(rec record, s string) ([]transcript.Message, bool) {
	for _, tag := range []string{"local-command-stdout", "local-command-stderr"} {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "<"+tag+">", ""), "</"+tag+">", "")
	}
	if s = strings.TrimSpace(s); s == "" {
		return nil, false
	}
	return []transcript.Message{{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCommandOutput, Text: s,
		Agent: Agent, NativeID: rec.UUID, Time: kit.ParseTime(rec.Timestamp)}}, true
}
