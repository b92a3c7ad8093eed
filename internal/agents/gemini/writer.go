package gemini

import (
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/transcript"
)

// OrphanCallOutput is the result written for a tool call whose result the
// source never recorded: without one Gemini sends a dangling functionCall.
const OrphanCallOutput = repair.OrphanCallOutput

// Writer writes a Gemini CLI JSONL session under Target.Home (~/.gemini).
type Writer struct {
	// Now stamps records that carry no time; nil means time.Now.
	Now func() time.Time
}

// Write implements agents.Writer.
func (w Writer) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	return w.WriteStream(t, agents.SliceSource(msgs))
}

// WriteStream implements agents.StreamWriter: Write's file, reading
// msgs one at a time (restore spools a large session to a file).
func (w Writer) WriteStream(t agents.Target, msgs agents.MessageSource) (agents.Written, error) {
	sid, cwd, err := t.Session("gemini")
	if err != nil {
		return agents.Written{}, err
	}
	now := kit.Clock(w.Now)
	// Without a summary the picker (/resume) asks the model for one and
	// shows its answer; the first request is the sensible title.
	title, err := agents.TitleOf(msgs, 80)
	if err != nil {
		return agents.Written{}, err
	}
	// The records are encoded to the file as they are rendered, never all
	// held: a 400 MB session would otherwise sit in memory as records and
	// again as the file's bytes (issue 27). The header, written first,
	// needs the first record's time, so that one is pulled ahead.
	first, recs, stop, err := kit.Ahead(render(sid, t.Model, msgs, now()), func(p []record) bool { return len(p) > 0 })
	if err != nil {
		return agents.Written{}, err
	}
	defer stop()

	// lastUpdated is when cast wrote the file, not its last message: Gemini's
	// start-up cleanup (general.sessionRetention, 30 days by default)
	// deletes a session whose lastUpdated is older, so a conversation
	// imported or idle for a month would vanish at the next Gemini start in
	// its folder.
	start, last := now(), now()
	if len(first) > 0 {
		start, _ = time.Parse(time.RFC3339Nano, first[0].Timestamp)
	}
	slug, err := projectSlug(t.Home, cwd)
	if err != nil {
		return agents.Written{}, err
	}
	dir := filepath.Join(t.Home, "tmp", slug, "chats")
	fresh := "session-" + start.UTC().Format("2006-01-02T15-04") + "-" + shortID(sid) + ".jsonl"
	return kit.StreamSessionJSONL(dir, existingFile(dir, sid), fresh, sid, header{
		SessionID:   sid,
		ProjectHash: projectHash(cwd),
		StartTime:   kit.ISOTime(start),
		LastUpdated: kit.ISOTime(last),
		Kind:        "main",
		Summary:     title,
	}, recs)
}

// existingFile finds the file of a session being rewritten, so a rewrite
// replaces it instead of leaving two files with one session id.
func existingFile(dir, sid string) string {
	matches, _ := sessionFiles(dir, sid)
	for _, m := range matches {
		if (Driver{}).SessionID(m) == sid { // its header line only
			return m
		}
	}
	return ""
}

// render maps neutral messages to Gemini records, yielded one at a time
// so the writer can encode each and let it go; an error reading msgs is
// yielded last. One "gemini" record is one model turn: its thoughts, then
// its text, then its tool calls, each carrying its result (Gemini replays
// results from there).
func render(sid, targetModel string, msgs agents.MessageSource, now time.Time) iter.Seq2[record, error] {
	return kit.Records(func(emit func(record) error) error {
		return renderTo(sid, targetModel, msgs, now, emit)
	})
}

// renderTo is render's body: it emits records until emit fails. It reads
// msgs twice: once to find where each call's result is, then to render,
// reading a call's result again from there (a session's messages are
// never all held).
func renderTo(sid, targetModel string, msgs agents.MessageSource, now time.Time, emitRec func(record) error) error {
	index, err := repair.IndexPositions(msgs.Each)
	if err != nil {
		return err
	}
	c := &renderer{sid: sid, targetModel: targetModel, msgs: msgs, index: index, times: kit.MessageTimes{Now: now}, emitRec: emitRec, written: map[string]bool{}}
	if err := msgs.Each(func(_ int64, m *transcript.Message) error { return c.add(m) }); err != nil {
		return err
	}
	return c.flush()
}

// renderer is renderTo's state: the records emitted so far, and the open
// gemini record, which gathers a turn's thoughts, text and calls.
type renderer struct {
	sid, targetModel string
	msgs             agents.MessageSource
	index            *repair.CallPositions
	times            kit.MessageTimes
	emitRec          func(record) error

	n       int             // records emitted
	written map[string]bool // call ids written

	cur         *record
	curAnswered bool // a result of cur's calls came: the next call is a new turn
}

// emit emits r as the next record.
func (c *renderer) emit(r *record) error {
	c.n++
	return c.emitRec(*r)
}

// when is m's time as a record carries it.
func (c *renderer) when(m *transcript.Message) string { return kit.ISOTime(c.times.Of(m)) }

// newRec is the next record, of type typ, at m's time; a gemini one
// names the model that said it when Gemini did, else the target's.
func (c *renderer) newRec(typ string, m *transcript.Message) *record {
	r := record{ID: repair.StableUUID(fmt.Sprintf("%s:%d", c.sid, c.n)), Type: typ, Timestamp: c.when(m)}
	if typ == "gemini" {
		r.Model = c.targetModel
		if m.Agent == Agent && m.Model != "" {
			r.Model = m.Model
		}
	}
	return &r
}

// flush emits the open gemini record.
func (c *renderer) flush() error {
	c.curAnswered = false
	if c.cur == nil {
		return nil
	}
	if c.cur.Content == nil {
		c.cur.Content = json.RawMessage(`""`)
	}
	r := c.cur
	c.cur = nil
	return c.emit(r)
}

// textParts is content of one text part.
func textParts(s string) json.RawMessage {
	b, _ := json.Marshal([]map[string]string{{"text": s}})
	return b
}

// add renders one source message.
func (c *renderer) add(m *transcript.Message) error {
	if !repair.IsWritable(m) {
		return nil
	}
	switch m.Kind {
	case transcript.KindUser:
		if err := c.flush(); err != nil {
			return err
		}
		r := c.newRec("user", m)
		if t := Escape(m.Text); len(m.Images) == 0 {
			r.Content = textParts(t)
		} else {
			r.Content, _ = json.Marshal(append([]part{{Text: &t}}, imageParts(m.Images)...))
		}
		return c.emit(r)
	case transcript.KindNotice:
		if err := c.flush(); err != nil {
			return err
		}
		return c.notice(m)
	case transcript.KindThinking:
		if err := c.answer(m); err != nil {
			return err
		}
		c.cur.Thoughts = append(c.cur.Thoughts, thought{Description: m.Text, Timestamp: c.when(m)})
	case transcript.KindAssistant:
		if m.Text == "" {
			return nil
		}
		if err := c.answer(m); err != nil {
			return err
		}
		c.cur.Content, _ = json.Marshal(m.Text)
	case transcript.KindToolCall:
		return c.call(m)
	case transcript.KindToolResult:
		return c.result(m)
	}
	return nil
}

// notice emits a notice: a compaction summary for the model, any other
// for the user only.
func (c *renderer) notice(m *transcript.Message) error {
	if m.NoticeType == transcript.NoticeCompactionSummary {
		// The summary stands for what came before it: the model
		// must read it, as a user record in cast's notice tag.
		r := c.newRec("user", m)
		r.Content = textParts(kit.CastNotice.Wrap(m.NoticeType, m.Text))
		return c.emit(r)
	}
	// "info" records show in Gemini's UI and are never sent to the model.
	r := c.newRec("info", m)
	r.Content, _ = json.Marshal(noticeText(m))
	return c.emit(r)
}

// answer opens a gemini record for m's thoughts or text unless the open
// one can take them: one with text or calls already is said and done.
func (c *renderer) answer(m *transcript.Message) error {
	if c.cur == nil || c.cur.Content != nil || len(c.cur.ToolCalls) > 0 {
		if err := c.flush(); err != nil {
			return err
		}
		c.cur = c.newRec("gemini", m)
	}
	return nil
}

// call adds a tool call, carrying its result, to the open gemini record.
func (c *renderer) call(m *transcript.Message) error {
	tc := m.ToolCall
	if c.written[tc.ID] {
		return nil // a repeated call id would pair one result twice
	}
	c.written[tc.ID] = true
	if c.cur == nil || c.curAnswered {
		if err := c.flush(); err != nil {
			return err
		}
		c.cur = c.newRec("gemini", m)
	}
	var res transcript.Message // the call's first result, read again from where it is
	if pos, ok := c.index.Results[tc.ID]; ok {
		var err error
		if res, err = c.msgs.At(pos); err != nil {
			return err
		}
	}
	c.cur.ToolCalls = append(c.cur.ToolCalls, callRecord(tc, res.ToolResult, res.Images, c.when(m)))
	return nil
}

// result handles a tool result where the source has it: one of a call
// was written with its call, so here it only marks the open record
// answered; one with no call becomes a user record.
func (c *renderer) result(m *transcript.Message) error {
	if c.index.Calls[m.ToolResult.CallID] {
		if c.cur != nil {
			for _, tc := range c.cur.ToolCalls {
				c.curAnswered = c.curAnswered || tc.ID == m.ToolResult.CallID
			}
		}
		return nil // written with its call
	}
	// A result whose call is not in the history: say so in plain
	// text rather than send a functionResponse the API rejects.
	if err := c.flush(); err != nil {
		return err
	}
	r := c.newRec("user", m)
	r.Content = textParts(repair.OrphanResultText(m.ToolResult))
	return c.emit(r)
}

func callRecord(tc *transcript.ToolCall, res *transcript.ToolResult, images []transcript.Image, ts string) toolCall {
	name := toolName(tc.Name)
	out, status, key := OrphanCallOutput, "error", "error"
	if res != nil {
		out, status, key = res.Output, "success", "output"
		if res.IsError {
			status, key = "error", "error"
		}
	}
	resp, _ := json.Marshal(map[string]string{key: out})
	// A result's images follow its functionResponse, as Gemini records a
	// read tool's picture.
	result, _ := json.Marshal(append([]part{{FunctionResponse: &functionResp{ID: tc.ID, Name: name, Response: resp}}}, imageParts(images)...))
	c := toolCall{
		ID:        tc.ID,
		Name:      name,
		Args:      repair.ArgsObject(tc.Input),
		Result:    result,
		Status:    status,
		Timestamp: ts,
	}
	if name != tc.Name {
		c.DisplayName = tc.Name // the UI shows the source agent's own name
	}
	return c
}

func noticeText(m *transcript.Message) string {
	if m.Text == "" {
		return "cast: " + m.NoticeType
	}
	return "cast: " + m.NoticeType + ": " + m.Text
}
