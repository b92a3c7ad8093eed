package grok

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

// OrphanCallOutput is the result written for a tool call whose result the
// source never recorded: Grok does not repair a dangling call, and the API
// rejects one.
const OrphanCallOutput = repair.OrphanCallOutput

// Writer writes a Grok Build session folder under Target.Home ($GROK_HOME).
type Writer struct {
	// Now stamps summary.json when messages carry no time; nil means time.Now.
	Now func() time.Time
}

// SessionDir is the folder of session id for cwd under home.
func SessionDir(home, cwd, id string) string {
	return filepath.Join(home, "sessions", projectDir(cwd), id)
}

// Write implements agents.Writer. Written.Path is the session's
// chat_history.jsonl.
func (w Writer) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	sid, cwd, err := t.Session("grok")
	if err != nil {
		return agents.Written{}, err
	}
	now := kit.Clock(w.Now)
	recs, outcomes := render(msgs)

	chat, err := kit.JSONLines(nil, recs)
	if err != nil {
		return agents.Written{}, err
	}
	var created, updated time.Time
	for _, m := range msgs {
		if !m.Time.IsZero() {
			if created.IsZero() {
				created = m.Time
			}
			updated = m.Time
		}
	}
	if created.IsZero() {
		created, updated = now(), now()
	}
	title := agents.Title(msgs, 80)
	if title == "" {
		title = "Imported session"
	}
	var s summary
	s.Info.ID, s.Info.Cwd = sid, cwd
	s.SessionSummary, s.GeneratedTitle = title, title
	s.CreatedAt, s.UpdatedAt = stamp(created), stamp(updated)
	s.NumMessages, s.NumChatMessages = len(recs), len(recs)
	// Grok accepts an empty model; a foreign one would be attributed wrongly.
	s.CurrentModelID = t.Model
	s.ChatFormatVersion = 1
	sum, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return agents.Written{}, err
	}

	dir := SessionDir(t.Home, cwd, sid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return agents.Written{}, err
	}
	path := filepath.Join(dir, ChatFile)
	if err := fsutil.WriteFileAtomic(path, chat, 0o600); err != nil {
		return agents.Written{}, err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, "summary.json"), append(sum, '\n'), 0o600); err != nil {
		return agents.Written{}, err
	}
	// chat_history.jsonl cannot say a tool failed; Grok records outcomes in
	// events.jsonl, where the reader looks for them.
	var events bytes.Buffer
	for _, o := range outcomes {
		o.TS = stamp(updated)
		b, _ := json.Marshal(o)
		events.Write(append(b, '\n'))
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, "events.jsonl"), events.Bytes(), 0o600); err != nil {
		return agents.Written{}, err
	}
	// Grok documents updates.jsonl as the log /resume replays; a folder
	// without it may not resume.
	updates, err := renderUpdates(sid, recs, outcomes, updated)
	if err != nil {
		return agents.Written{}, err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, UpdatesFile), updates, 0o600); err != nil {
		return agents.Written{}, err
	}
	return agents.Written{NativeID: sid, Path: path}, nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// render maps neutral messages to chat records: wrapped user prompts with
// consecutive prompt_index values, assistant records with their calls, and
// each call's result right after its assistant record.
// toolEvent is an events.jsonl tool_completed line.
type toolEvent struct {
	TS         string `json:"ts"`
	Type       string `json:"type"`
	ToolName   string `json:"tool_name"`
	Outcome    string `json:"outcome"`
	ToolCallID string `json:"tool_call_id"`
}

func render(msgs []transcript.Message) ([]record, []toolEvent) {
	results, calls := repair.IndexCalls(msgs)
	var out []record
	var events []toolEvent
	var cur *record
	prompts := 0
	written := map[string]bool{}
	flush := func() {
		if cur == nil {
			return
		}
		if cur.Content == nil {
			cur.Content = json.RawMessage(`""`)
		}
		out = append(out, *cur)
		for _, c := range cur.ToolCalls {
			text, outcome := OrphanCallOutput, "error"
			if r := results[c.ID]; r != nil {
				text, outcome = r.Output, "success"
				if r.IsError {
					outcome = "error"
				}
			}
			content, _ := json.Marshal(text)
			out = append(out, record{Type: "tool_result", ToolCallID: c.ID, Content: content})
			events = append(events, toolEvent{Type: "tool_completed", ToolName: c.Name, Outcome: outcome, ToolCallID: c.ID})
		}
		cur = nil
	}
	userRec := func(text string) {
		i := prompts
		prompts++
		content, _ := json.Marshal([]textPart{{Type: "text", Text: queryOpen + "\n" + text + "\n" + queryClose}})
		out = append(out, record{Type: "user", Content: content, PromptIndex: &i})
	}
	open := func(m *transcript.Message) {
		if cur == nil {
			cur = &record{Type: "assistant"}
			if m.Agent == Agent {
				cur.ModelID = m.Model
			}
		}
	}
	for m := range repair.Writable(msgs) {
		switch m.Kind {
		case transcript.KindUser:
			flush()
			userRec(m.Text)
		case transcript.KindAssistant:
			if m.Text == "" {
				continue
			}
			if cur != nil && (cur.Content != nil || len(cur.ToolCalls) > 0) {
				flush()
			}
			open(m)
			cur.Content, _ = json.Marshal(m.Text)
		case transcript.KindToolCall:
			tc := m.ToolCall
			if written[tc.ID] {
				continue // a repeated call id would pair one result twice
			}
			written[tc.ID] = true
			open(m)
			cur.ToolCalls = append(cur.ToolCalls, toolCall{ID: tc.ID, Name: repair.ToolName(tc.Name), Arguments: string(repair.ArgsObject(tc.Input))})
		case transcript.KindToolResult:
			if calls[m.ToolResult.CallID] {
				if cur != nil {
					for _, c := range cur.ToolCalls {
						if c.ID == m.ToolResult.CallID {
							flush() // answered: what follows is a new record
							break
						}
					}
				}
				continue // written right after its call
			}
			flush()
			userRec(repair.OrphanResultText(m.ToolResult))
		}
		// Thinking and notices are not written: see the package doc.
	}
	flush()
	return out, events
}
