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
	base := transcript.Message{Agent: Agent, NativeID: rec.UUID, Time: kit.ParseTime(rec.Timestamp)}
	var out []transcript.Message
	accounted := false // something left out was reported, or is known unreadable
	note := func(kind string) { skip(kind); accounted = true }
	contentBlocks := func(raw json.RawMessage) []block {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			// The API takes a string for any message's content.
			return []block{{Type: "text", Text: s}}
		}
		bs, bad := kit.DecodeElems[block](raw)
		for range bad {
			note(kindBadBlock)
		}
		return bs
	}
	add := func(msg transcript.Message) {
		if len(out) > 0 {
			msg.NativeID = fmt.Sprintf("%s#%d", rec.UUID, len(out))
		}
		out = append(out, msg)
	}
	if rec.Type == "assistant" {
		// Synthetic turns ("No response requested.", API errors) were
		// written by the CLI, not said by a model.
		if m.Model == "<synthetic>" || rec.IsAPIErrorMessage {
			return nil, false
		}
		base.Model = m.Model
		for _, b := range contentBlocks(m.Content) {
			msg := base
			switch b.Type {
			case "text":
				if b.Text == "" {
					continue
				}
				msg.Kind, msg.Text = transcript.KindAssistant, b.Text
			case "thinking":
				if b.Thinking == "" {
					// Signature only (newer CLIs store no text): nothing
					// readable to carry, so known, not reported.
					accounted = true
					continue
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
					accounted = true // encrypted: nothing readable to carry
					continue
				} else {
					note(cmp.Or(b.Type, "untyped") + " block")
					continue
				}
			}
			add(msg)
		}
		return out, len(out) > 0 || accounted
	}

	// User records.
	if rec.IsMeta {
		// Context the CLI injected (caveats, skill bodies) is regenerated on
		// resume, except cast's own notices.
		if typ, text, ok := noticeTag.Unwrap(flatten(m.Content)); ok && typ != omittedType {
			msg := base
			msg.Kind, msg.NoticeType, msg.Text = transcript.KindNotice, typ, text
			return []transcript.Message{msg}, true
		}
		return nil, false
	}
	if rec.IsCompactSummary {
		msg := base
		msg.Kind, msg.NoticeType = transcript.KindNotice, transcript.NoticeCompactionSummary
		msg.Text = flatten(m.Content)
		return []transcript.Message{msg}, true
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		// A string is the prompt as typed: kept verbatim, even where it
		// looks like markup Claude Code uses, but for a local command's
		// whole output, which Claude Code writes as a user record after a
		// compaction (the user never said it).
		if out, ok := commandOutput(s); ok {
			return localCommandNotice(rec, out)
		}
		if c := commandRecord.FindStringSubmatch(s); c != nil {
			// A slash command Claude Code ran: read as it was typed, so the
			// node finds the turn's prompt in it, arguments and all.
			s = strings.TrimSpace(c[1] + " " + c[2])
		}
		if strings.TrimSpace(s) != "" {
			msg := base
			msg.Kind, msg.Text = transcript.KindUser, s
			add(msg)
		}
		return out, len(out) > 0
	}
	for _, b := range contentBlocks(m.Content) {
		msg := base
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) == "" || injectedReminder(b.Text) {
				continue
			}
			msg.Kind, msg.Text = transcript.KindUser, b.Text
			if out, ok := commandOutput(b.Text); ok {
				msg.Kind, msg.NoticeType, msg.Text = transcript.KindNotice, transcript.NoticeCommandOutput, out
			}
		case "image":
			im, ok := blockImage(b, note)
			if !ok {
				msg.Kind, msg.Text = transcript.KindUser, "[image omitted]"
				break
			}
			if kit.AttachImage(out, im) {
				continue
			}
			msg.Kind, msg.Images = transcript.KindUser, []transcript.Image{im}
		case "document":
			msg.Kind, msg.Text = transcript.KindUser, "[document omitted]"
		case "tool_result":
			out, images := resultContent(b.Content, note)
			res := &transcript.ToolResult{CallID: b.ToolUseID, Output: out, IsError: b.IsError}
			res.ExitCode = exitCode(out, b.IsError, rec.ToolUseResult)
			msg.Kind, msg.ToolResult, msg.Images = transcript.KindToolResult, res, images
		default:
			note(cmp.Or(b.Type, "untyped") + " block")
			continue
		}
		add(msg)
	}
	return out, len(out) > 0 || accounted
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
