package pi

import (
	"encoding/json"
	"iter"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/transcript"
)

// castAPI marks assistant messages cast wrote. It never equals a real
// model's api, so pi replays their thinking as plain text.
const castAPI = "cast"

// thinkingSep ends every thinking block cast writes: pi replays foreign
// thinking as a text block joined to the answer with nothing between them.
// The reader removes it again from castAPI messages.
const thinkingSep = "\n\n"

// OrphanCallOutput is the result written for a tool call whose result the
// source never recorded (pi would otherwise invent "No result provided").
const OrphanCallOutput = repair.OrphanCallOutput

// Writer writes a pi session file under Target.Home, pi's agent dir.
type Writer struct {
	// Now stamps entries that carry no time; nil means time.Now.
	Now func() time.Time
}

// SessionDir is where pi looks for the sessions of cwd (its
// getDefaultSessionDir).
func SessionDir(home, cwd string) string {
	safe := cwd
	if strings.HasPrefix(safe, "/") || strings.HasPrefix(safe, `\`) {
		safe = safe[1:] // pi strips one leading separator only
	}
	safe = strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(safe)
	return filepath.Join(home, "sessions", "--"+safe+"--")
}

// Write implements agents.Writer.
func (w Writer) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	return w.WriteStream(t, agents.SliceSource(msgs))
}

// WriteStream implements agents.StreamWriter: Write's file, reading
// msgs one at a time (restore spools a large session to a file).
func (w Writer) WriteStream(t agents.Target, msgs agents.MessageSource) (agents.Written, error) {
	sid, cwd, err := t.Session("pi")
	if err != nil {
		return agents.Written{}, err
	}
	now := kit.Clock(w.Now)
	at := now()
	// The file's name and header carry the time of the first message
	// render places; it is known once render has emitted an entry for a
	// message, so the entries up to there (a model change before it) are
	// pulled ahead.
	var start time.Time
	_, entries, stop, err := kit.Ahead(render(sid, t.Model, msgs, at, &start), func([]entry) bool { return !start.IsZero() })
	if err != nil {
		return agents.Written{}, err
	}
	defer stop()
	if start.IsZero() {
		start = at
	}

	dir := SessionDir(t.Home, cwd)
	return kit.StreamSessionJSONL(dir, existingFile(dir, sid), fileStamp(start)+"_"+strings.ReplaceAll(sid, "/", "_")+".jsonl", sid,
		header{Type: "session", Version: 3, ID: sid, Timestamp: kit.ISOTime(start), Cwd: cwd}, entries)
}

// existingFile finds the file of a session being rewritten, so a rewrite
// replaces it instead of leaving two files with one session id.
func existingFile(dir, sid string) string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*_"+sid+".jsonl"))
	if len(matches) > 0 {
		return matches[0]
	}
	return ""
}

// fileStamp is t as pi puts it in a session file's name.
func fileStamp(t time.Time) string {
	return strings.NewReplacer(":", "-", ".", "-").Replace(kit.ISOTime(t))
}

// render maps neutral messages to a linear chain of pi entries, emitted
// one at a time; start is set to the time of the first message it
// places (before its entry is emitted). An assistant message holds
// thinking, text and tool calls; its results follow it at once, whatever
// came in between in the source. It reads msgs twice: once to find where
// each call's result is, then to render, reading a call's result again
// from there (a session's messages are never all held).
func render(sid, targetModel string, msgs agents.MessageSource, now time.Time, start *time.Time) iter.Seq2[entry, error] {
	return kit.Records(func(emit func(entry) error) error {
		return renderTo(sid, targetModel, msgs, now, start, emit)
	})
}

// renderTo is render's body: it emits entries until emit fails.
func renderTo(sid, targetModel string, msgs agents.MessageSource, now time.Time, start *time.Time, emit func(entry) error) error {
	index, err := repair.IndexPositions(msgs.Each)
	if err != nil {
		return err
	}
	c := &renderer{sid: sid, msgs: msgs, index: index, times: kit.MessageTimes{Now: now}, start: start, emit: emit,
		taken: map[string]bool{}, written: map[string]bool{}}
	if prov, model, ok := strings.Cut(targetModel, "/"); ok && prov != "" && model != "" {
		// Lets `pi --session F` pick the model without --provider/--model.
		if err := c.push(entry{Type: "model_change", Provider: prov, ModelID: model}, now); err != nil {
			return err
		}
	}
	if err := msgs.Each(func(_ int64, m *transcript.Message) error { return c.add(m) }); err != nil {
		return err
	}
	return c.flush()
}

// renderer is renderTo's state: the entries emitted so far, and the open
// assistant message, held until it ends so that its calls' results can
// follow it.
type renderer struct {
	sid   string
	msgs  agents.MessageSource
	index *repair.CallPositions
	times kit.MessageTimes
	start *time.Time
	emit  func(entry) error

	taken   map[string]bool // entry ids given
	n       int             // entries emitted
	prev    string          // the last one's id
	written map[string]bool // call ids written

	// The open assistant message and the calls in it.
	cur       *message
	curBlocks []any // written blocks must keep empty text fields
	curTime   time.Time
	curCalls  []transcript.ToolCall
}

// when is m's time; the first one asked for is the session's start.
func (c *renderer) when(m *transcript.Message) time.Time {
	t := c.times.Of(m)
	if c.start.IsZero() {
		*c.start = t
	}
	return t
}

// push emits e at t as the next entry of the chain.
func (c *renderer) push(e entry, t time.Time) error {
	e.ID = entryID(c.sid, c.n, c.taken)
	if c.n > 0 {
		p := c.prev
		e.ParentID = &p
	}
	e.Timestamp = kit.ISOTime(t)
	c.n, c.prev = c.n+1, e.ID
	return c.emit(e)
}

// pushMessage emits msg as a message entry at m's time.
func (c *renderer) pushMessage(m *transcript.Message, msg *message) error {
	t := c.when(m)
	msg.Timestamp = msTime(t)
	return c.push(entry{Type: "message", Message: msg}, t)
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
		return c.pushMessage(m, &message{Role: "user", Content: contentBlocks(m.Text, m.Images)})
	case transcript.KindNotice:
		if err := c.flush(); err != nil {
			return err
		}
		return c.notice(m)
	case transcript.KindThinking, transcript.KindAssistant:
		return c.block(m)
	case transcript.KindToolCall:
		c.call(m)
	case transcript.KindToolResult:
		return c.result(m)
	}
	return nil
}

// notice emits a notice: a compaction summary as pi's own, any other
// as a custom entry.
func (c *renderer) notice(m *transcript.Message) error {
	if m.NoticeType == transcript.NoticeCompactionSummary {
		// pi's own summary message: pi sends it to the model as
		// the summary of what came before, as after its own /compact.
		return c.pushMessage(m, &message{Role: "compactionSummary", Summary: m.Text})
	}
	// A custom entry stays on the chain but out of the model context.
	data, _ := json.Marshal(map[string]string{"noticeType": m.NoticeType, "text": m.Text})
	return c.push(entry{Type: "custom", CustomType: noticeType, Data: data}, c.when(m))
}

// block adds thinking or text to the open assistant message; after
// tool calls it starts a new one, as the model answered their results.
func (c *renderer) block(m *transcript.Message) error {
	if len(c.curCalls) > 0 {
		if err := c.flush(); err != nil {
			return err
		}
	}
	c.open(m)
	if m.Kind == transcript.KindThinking {
		c.curBlocks = append(c.curBlocks, thinkingBlock{Type: "thinking", Thinking: m.Text + thinkingSep})
	} else {
		c.curBlocks = append(c.curBlocks, textBlock{Type: "text", Text: m.Text})
	}
	return nil
}

// call adds a tool call to the open assistant message.
func (c *renderer) call(m *transcript.Message) {
	tc := m.ToolCall
	if c.written[tc.ID] {
		return // a repeated call id would pair one result twice
	}
	c.written[tc.ID] = true
	c.open(m)
	c.curBlocks = append(c.curBlocks, toolCallBlock{Type: "toolCall", ID: tc.ID, Name: repair.ToolName(tc.Name), Arguments: repair.ArgsObject(tc.Input)})
	c.curCalls = append(c.curCalls, *tc) // a copy: m is the source's only while it is read
}

// result handles a tool result where the source has it: one of a call
// is written right after its call (flush), so here it only ends the open
// message; one with no call becomes a user message.
func (c *renderer) result(m *transcript.Message) error {
	if c.index.Calls[m.ToolResult.CallID] {
		for _, call := range c.curCalls {
			if call.ID == m.ToolResult.CallID {
				return c.flush() // answered: what follows is a new message
			}
		}
		return nil // written right after its call
	}
	if err := c.flush(); err != nil {
		return err
	}
	return c.pushMessage(m, &message{Role: "user", Content: textBlocks(repair.OrphanResultText(m.ToolResult))})
}

// open starts an assistant message for m unless one is open.
func (c *renderer) open(m *transcript.Message) {
	if c.cur != nil {
		return
	}
	model, prov := m.Model, provider(m.Agent)
	if model == "" {
		model = "unknown"
	}
	c.cur = &message{Role: "assistant", API: castAPI, Provider: prov, Model: model, Usage: &usage{}}
	c.curTime = c.when(m)
}

// flush emits the open assistant message, then its calls' results.
func (c *renderer) flush() error {
	if c.cur == nil {
		return nil
	}
	c.cur.StopReason = "stop"
	if len(c.curCalls) > 0 {
		c.cur.StopReason = "toolUse"
	}
	c.cur.Timestamp = msTime(c.curTime)
	c.cur.Content, _ = json.Marshal(c.curBlocks)
	if err := c.push(entry{Type: "message", Message: c.cur}, c.curTime); err != nil {
		return err
	}
	for _, call := range c.curCalls {
		r, err := c.callResult(call)
		if err != nil {
			return err
		}
		if err := c.push(entry{Type: "message", Message: r}, c.curTime); err != nil {
			return err
		}
	}
	c.cur, c.curCalls, c.curBlocks = nil, nil, nil
	return nil
}

// callResult is the toolResult message of call: its first result, read
// again from where it is in the source, or OrphanCallOutput.
func (c *renderer) callResult(call transcript.ToolCall) (*message, error) {
	r := &message{Role: "toolResult", ToolCallID: call.ID, ToolName: repair.ToolName(call.Name), Timestamp: msTime(c.curTime)}
	isErr := true
	if pos, ok := c.index.Results[call.ID]; ok {
		m, err := c.msgs.At(pos)
		if err != nil {
			return nil, err
		}
		res := m.ToolResult
		isErr = res.IsError
		r.Content = contentBlocks(res.Output, m.Images)
		if res.ExitCode != nil {
			r.Details, _ = json.Marshal(map[string]int32{"exitCode": *res.ExitCode})
		}
	} else {
		r.Content = textBlocks(OrphanCallOutput)
	}
	r.IsError = &isErr
	return r, nil
}

// Blocks as written: unlike block, no field is ever left out.
type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingBlock struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

type toolCallBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func textBlocks(s string) json.RawMessage { return contentBlocks(s, nil) }

// imageBlock is an image as pi stores it: base64 data and its MIME type.
type imageBlock struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

// contentBlocks is user-side content: the text, then the images. An image
// with no words goes alone: pi passes an empty text block on to the
// provider, and Gemini's API refuses it (400 "empty text parameter").
func contentBlocks(s string, images []transcript.Image) json.RawMessage {
	var bs []any
	if s != "" || len(images) == 0 {
		bs = append(bs, textBlock{Type: "text", Text: s})
	}
	for _, im := range images {
		bs = append(bs, imageBlock{Type: "image", Data: kit.ImageBase64(im), MimeType: im.MediaType})
	}
	b, _ := json.Marshal(bs)
	return b
}

func msTime(t time.Time) json.RawMessage {
	b, _ := json.Marshal(t.UnixMilli())
	return b
}
