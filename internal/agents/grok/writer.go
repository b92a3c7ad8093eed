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
	created, updated := span(msgs, now)
	sum, err := summaryJSON(sid, cwd, t.Model, agents.Title(msgs, 80), created, updated, len(recs))
	if err != nil {
		return agents.Written{}, err
	}
	dir := SessionDir(t.Home, cwd, sid)
	if err := writeSession(dir, sid, chat, sum, recs, outcomes, updated); err != nil {
		return agents.Written{}, err
	}
	return agents.Written{NativeID: sid, Path: filepath.Join(dir, ChatFile)}, nil
}

// span is the time of the first and of the last message that has one;
// now when none has.
func span(msgs []transcript.Message, now func() time.Time) (created, updated time.Time) {
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
	return created, updated
}

// summaryJSON is the session's summary.json, of n chat records.
func summaryJSON(sid, cwd, model, title string, created, updated time.Time, n int) ([]byte, error) {
	if title == "" {
		title = "Imported session"
	}
	var s summary
	s.Info.ID, s.Info.Cwd = sid, cwd
	s.SessionSummary, s.GeneratedTitle = title, title
	s.CreatedAt, s.UpdatedAt = stamp(created), stamp(updated)
	s.NumMessages, s.NumChatMessages = n, n
	// Grok accepts an empty model; a foreign one would be attributed wrongly.
	s.CurrentModelID = model
	s.ChatFormatVersion = 1
	return json.MarshalIndent(s, "", "  ")
}

// writeSession writes the session folder dir: the chat, its summary, the
// tools' outcomes and the updates log, each file whole or not at all.
func writeSession(dir, sid string, chat, sum []byte, recs []record, outcomes []toolEvent, updated time.Time) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, ChatFile), chat, 0o600); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, "summary.json"), append(sum, '\n'), 0o600); err != nil {
		return err
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
		return err
	}
	// Grok documents updates.jsonl as the log /resume replays; a folder
	// without it may not resume.
	updates, err := renderUpdates(sid, recs, outcomes, updated)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, UpdatesFile), updates, 0o600)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// toolEvent is an events.jsonl tool_completed line.
type toolEvent struct {
	TS         string `json:"ts"`
	Type       string `json:"type"`
	ToolName   string `json:"tool_name"`
	Outcome    string `json:"outcome"`
	ToolCallID string `json:"tool_call_id"`
}

// render maps neutral messages to chat records: wrapped user prompts with
// consecutive prompt_index values, assistant records with their calls, and
// each call's result right after its assistant record.
func render(msgs []transcript.Message) ([]record, []toolEvent) {
	results, calls := repair.IndexCalls(msgs)
	c := &renderer{results: results, calls: calls, written: map[string]bool{}}
	for m := range repair.Writable(msgs) {
		c.add(m)
		// Thinking and notices are not written: see the package doc.
	}
	c.flush()
	return c.out, c.events
}

// renderer is render's state: the records made so far, and the open
// assistant record, whose calls' results follow it.
type renderer struct {
	results map[string]*transcript.ToolResult // by call id
	calls   map[string]bool                   // call ids the source has
	written map[string]bool                   // call ids written
	out     []record
	events  []toolEvent
	cur     *record
	prompts int // user records written
}

// add renders one source message.
func (c *renderer) add(m *transcript.Message) {
	switch m.Kind {
	case transcript.KindUser:
		c.flush()
		c.user(m.Text)
	case transcript.KindAssistant:
		if m.Text == "" {
			return
		}
		if c.cur != nil && (c.cur.Content != nil || len(c.cur.ToolCalls) > 0) {
			c.flush()
		}
		c.open(m)
		c.cur.Content, _ = json.Marshal(m.Text)
	case transcript.KindToolCall:
		tc := m.ToolCall
		if c.written[tc.ID] {
			return // a repeated call id would pair one result twice
		}
		c.written[tc.ID] = true
		c.open(m)
		c.cur.ToolCalls = append(c.cur.ToolCalls, toolCall{ID: tc.ID, Name: repair.ToolName(tc.Name), Arguments: string(repair.ArgsObject(tc.Input))})
	case transcript.KindToolResult:
		c.result(m)
	}
}

// result handles a tool result where the source has it: one of a call
// is written right after its call (flush), so here it only ends the open
// record; one with no call becomes a user prompt.
func (c *renderer) result(m *transcript.Message) {
	if c.calls[m.ToolResult.CallID] {
		if c.cur != nil {
			for _, tc := range c.cur.ToolCalls {
				if tc.ID == m.ToolResult.CallID {
					c.flush() // answered: what follows is a new record
					break
				}
			}
		}
		return // written right after its call
	}
	c.flush()
	c.user(repair.OrphanResultText(m.ToolResult))
}

// user adds a user prompt of text.
func (c *renderer) user(text string) {
	i := c.prompts
	c.prompts++
	content, _ := json.Marshal([]textPart{{Type: "text", Text: queryOpen + "\n" + text + "\n" + queryClose}})
	c.out = append(c.out, record{Type: "user", Content: content, PromptIndex: &i})
}

// open starts an assistant record for m unless one is open.
func (c *renderer) open(m *transcript.Message) {
	if c.cur == nil {
		c.cur = &record{Type: "assistant"}
		if m.Agent == Agent {
			c.cur.ModelID = m.Model
		}
	}
}

// flush adds the open assistant record, then its calls' results and
// their outcomes.
func (c *renderer) flush() {
	if c.cur == nil {
		return
	}
	if c.cur.Content == nil {
		c.cur.Content = json.RawMessage(`""`)
	}
	c.out = append(c.out, *c.cur)
	for _, tc := range c.cur.ToolCalls {
		text, outcome := OrphanCallOutput, "error"
		if r := c.results[tc.ID]; r != nil {
			text, outcome = r.Output, "success"
			if r.IsError {
				outcome = "error"
			}
		}
		content, _ := json.Marshal(text)
		c.out = append(c.out, record{Type: "tool_result", ToolCallID: tc.ID, Content: content})
		c.events = append(c.events, toolEvent{Type: "tool_completed", ToolName: tc.Name, Outcome: outcome, ToolCallID: tc.ID})
	}
	c.cur = nil
}
