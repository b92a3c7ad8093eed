package grok

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name recorded on neutral messages read from Grok Build.
const Agent = "grok"

// ChatFile is the transcript file in a session folder.
const ChatFile = "chat_history.jsonl"

// Reader reads a Grok Build session: the folder, or its chat_history.jsonl.
type Reader struct{}

// Read implements agents.Reader.
func (Reader) Read(path string) ([]transcript.Message, error) {
	d, err := ReadSession(path)
	return d.Messages, err
}

// ReadCwd implements agents.CwdReader: the session info's cwd.
func (Reader) ReadCwd(path string) (string, error) {
	d, err := ReadSession(path)
	return d.Cwd, err
}

// ReadSubagent implements agents.SubagentReader: a session whose
// summary.json says session_kind "subagent" (it does not name its parent).
func (Reader) ReadSubagent(path string) (agents.Subagent, bool, error) {
	d, err := ReadSession(path)
	if err != nil || d.Kind != "subagent" {
		return agents.Subagent{}, false, err
	}
	s := agents.Subagent{Kind: "subagent"}
	if d.AgentName != "" {
		s.Kind += " (" + d.AgentName + ")"
	}
	return s, true, nil
}

// Decoded is everything a reader got out of one session.
type Decoded struct {
	Messages  []transcript.Message
	SessionID string
	Cwd       string
	Kind      string // summary.json session_kind: "", "headless", "subagent"
	AgentName string // summary.json agent_name: the kind of subagent ("general-purpose")
	Skipped   int    // lines that were not JSON or not a known record
	// Kinds counts what was left out because the reader does not know it
	// (malformed lines, record types of other versions), for the import
	// report.
	Kinds kit.Skips
}

// ReadReport implements agents.ReportingReader.
func (Reader) ReadReport(path string) ([]transcript.Message, map[string]int, error) {
	d, err := ReadSession(path)
	return d.Messages, d.Kinds, err
}

// knownRecords are the record types Grok writes that carry no conversation
// cast keeps: the CLI's own prompt and server-side searches whose results
// the transcript does not hold.
var knownRecords = map[string]bool{"user": true, "reasoning": true, "assistant": true, "tool_result": true, "system": true, "backend_tool_call": true}

// ReadSession reads a session folder (or its chat_history.jsonl) with the
// summary.json and events.jsonl next to it when they exist. A folder
// without chat_history.jsonl is read from its updates.jsonl, as is that
// file given by name.
func ReadSession(path string) (Decoded, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, ChatFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			// A folder with only the log that drives /resume.
			path = filepath.Join(filepath.Dir(path), UpdatesFile)
		}
	}
	dir := filepath.Dir(path)
	var d Decoded
	var err error
	if filepath.Base(path) == UpdatesFile {
		d, err = readUpdates(path)
	} else {
		var data []byte
		if data, err = os.ReadFile(path); err != nil {
			return Decoded{}, err
		}
		d, err = Decode(data, toolFailures(filepath.Join(dir, "events.jsonl")))
	}
	if raw, serr := os.ReadFile(filepath.Join(dir, "summary.json")); serr == nil {
		var s summary
		if json.Unmarshal(raw, &s) != nil {
			d.Kinds.Add("summary.json that did not decode") // its cwd, id and model are not known
		} else {
			d.Cwd, d.Kind, d.AgentName = s.Info.Cwd, s.SessionKind, s.AgentName
			if s.Info.ID != "" {
				d.SessionID = s.Info.ID
			}
			for i := range d.Messages {
				if d.Messages[i].Model == "" && d.Messages[i].Kind != transcript.KindUser {
					d.Messages[i].Model = s.CurrentModelID
				}
			}
		}
	}
	return d, err
}

func readUpdates(path string) (Decoded, error) {
	f, err := os.Open(path)
	if err != nil {
		return Decoded{}, err
	}
	defer f.Close()
	return DecodeUpdates(f)
}

// toolFailures reads the tool call ids events.jsonl reports as failed:
// chat_history.jsonl itself does not say whether a tool failed.
func toolFailures(path string) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	failed := map[string]bool{}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var ev struct {
			Outcome    string `json:"outcome"`
			ToolCallID string `json:"tool_call_id"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.ToolCallID != "" && ev.Outcome == "error" {
			failed[ev.ToolCallID] = true
		}
	}
	return failed
}

// Decode reads chat_history.jsonl content; failed names tool calls whose
// results are errors. Malformed lines are skipped and counted; it fails
// only when there were lines and none could be used.
func Decode(data []byte, failed map[string]bool) (Decoded, error) {
	var d Decoded
	used, n := 0, 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		n++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil || r.Type == "" {
			d.Skipped++
			d.Kinds.Add(kit.Undecoded(line))
			continue
		}
		if !knownRecords[r.Type] {
			d.Kinds.Add(r.Type + " record")
		}
		used++
		d.Messages = append(d.Messages, toNeutral(r, fmt.Sprintf("L%d", n), failed, d.Kinds.Add)...)
	}
	// An empty file is a session with nothing in it yet, which the writer
	// produces for an empty conversation; only garbage is an error.
	if used == 0 && d.Skipped > 0 {
		return d, errors.New("grok: no chat record found")
	}
	return d, nil
}

// toNeutral converts one record; skip is told what it leaves out.
func toNeutral(r record, nid string, failed map[string]bool, skip func(kind string)) []transcript.Message {
	var out []transcript.Message
	add := func(m transcript.Message, suffix string) {
		m.Agent, m.NativeID = Agent, nid+suffix
		out = append(out, m)
	}
	switch r.Type {
	case "user":
		if r.SyntheticReason != "" {
			return nil // scaffolding the CLI added, not a prompt
		}
		text := contentText(r.Content)
		if q, ok := userQuery(text); ok {
			add(transcript.Message{Kind: transcript.KindUser, Text: q}, "")
		} else if r.PromptIndex != nil || !onlyContext(text) {
			// Subagent transcripts carry their task unwrapped.
			add(transcript.Message{Kind: transcript.KindUser, Text: text}, "")
		}
	case "reasoning":
		var parts []string
		for _, s := range r.Summary {
			if s.Text != "" {
				parts = append(parts, s.Text)
			}
		}
		if len(parts) > 0 {
			add(transcript.Message{Kind: transcript.KindThinking, Text: strings.Join(parts, "\n")}, "")
		}
	case "assistant":
		if text := contentText(r.Content); text != "" {
			add(transcript.Message{Kind: transcript.KindAssistant, Text: text, Model: r.ModelID}, "")
		}
		for _, c := range r.ToolCalls {
			if c.ID == "" || c.Name == "" {
				skip(kindCallWithoutID)
				continue
			}
			add(transcript.Message{Kind: transcript.KindToolCall, Model: r.ModelID,
				ToolCall: &transcript.ToolCall{ID: c.ID, Name: c.Name, Input: c.Arguments}}, "#call:"+c.ID)
		}
	case "tool_result":
		if r.ToolCallID == "" {
			skip(kindResultWithoutID)
			break
		}
		add(transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{
			CallID: r.ToolCallID, Output: contentText(r.Content), IsError: failed[r.ToolCallID]}}, "")
	}
	// system records are the CLI's own prompt; backend_tool_call records are
	// server-side searches whose results the transcript does not keep.
	return out
}

// Kinds of what the readers leave out of a tool call or result.
const (
	kindCallWithoutID   = "tool call without an id or name"
	kindResultWithoutID = "tool result without a call id"
)

// contentText reads content that is a string, a text part list, or any
// other JSON (kept as JSON text so nothing is lost).
func contentText(raw json.RawMessage) string {
	if s, ok := kit.StringJSON(raw); ok {
		return s
	}
	raw = bytes.TrimSpace(raw)
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) == nil {
		var texts []string
		for _, p := range parts {
			var tp textPart
			if json.Unmarshal(p, &tp) == nil && tp.Type == "text" {
				texts = append(texts, tp.Text)
			}
		}
		if len(texts) > 0 || len(parts) == 0 {
			return strings.Join(texts, "")
		}
	}
	return string(raw)
}

const queryOpen, queryClose = "<user_query>", "</user_query>"

// userQuery unwraps a real prompt, which Grok wraps in <user_query> tags
// with a newline inside each.
func userQuery(text string) (string, bool) {
	i := strings.Index(text, queryOpen)
	j := strings.LastIndex(text, queryClose)
	if i < 0 || j < i+len(queryOpen) {
		return "", false
	}
	q := text[i+len(queryOpen) : j]
	q = strings.TrimPrefix(q, "\n")
	q = strings.TrimSuffix(q, "\n")
	return q, true
}

var openTag = regexp.MustCompile(`^<([A-Za-z][A-Za-z0-9_-]*)>`)

// onlyContext reports whether text is nothing but tagged blocks such as
// <user_info>…</user_info> or <system-reminder>…</system-reminder>: context
// the CLI injects, not something a person typed.
func onlyContext(text string) bool {
	t := strings.TrimSpace(text)
	if t == "" {
		return true
	}
	for t != "" {
		m := openTag.FindStringSubmatch(t)
		if m == nil {
			return false
		}
		end := strings.Index(t, "</"+m[1]+">")
		if end < 0 {
			return false
		}
		t = strings.TrimSpace(t[end+len(m[1])+3:])
	}
	return true
}
