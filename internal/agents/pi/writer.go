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
	times := kit.MessageTimes{Now: now}
	taken := map[string]bool{}
	n, prev := 0, "" // entries emitted; the last one's id
	when := func(m *transcript.Message) time.Time {
		t := times.Of(m)
		if start.IsZero() {
			*start = t
		}
		return t
	}
	push := func(e entry, t time.Time) error {
		e.ID = entryID(sid, n, taken)
		if n > 0 {
			p := prev
			e.ParentID = &p
		}
		e.Timestamp = kit.ISOTime(t)
		n, prev = n+1, e.ID
		return emit(e)
	}
	if prov, model, ok := strings.Cut(targetModel, "/"); ok && prov != "" && model != "" {
		// Lets `pi --session F` pick the model without --provider/--model.
		if err := push(entry{Type: "model_change", Provider: prov, ModelID: model}, now); err != nil {
			return err
		}
	}

	// The open assistant message and the calls in it.
	var cur *message
	var curBlocks []any // written blocks must keep empty text fields
	var curTime time.Time
	var curCalls []transcript.ToolCall
	written := map[string]bool{}
	flush := func() error {
		if cur == nil {
			return nil
		}
		cur.StopReason = "stop"
		if len(curCalls) > 0 {
			cur.StopReason = "toolUse"
		}
		cur.Timestamp = msTime(curTime)
		cur.Content, _ = json.Marshal(curBlocks)
		if err := push(entry{Type: "message", Message: cur}, curTime); err != nil {
			return err
		}
		for _, c := range curCalls {
			r := &message{Role: "toolResult", ToolCallID: c.ID, ToolName: repair.ToolName(c.Name), Timestamp: msTime(curTime)}
			isErr := true
			if pos, ok := index.Results[c.ID]; ok { // the call's first result, read again from where it is
				m, err := msgs.At(pos)
				if err != nil {
					return err
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
			if err := push(entry{Type: "message", Message: r}, curTime); err != nil {
				return err
			}
		}
		cur, curCalls, curBlocks = nil, nil, nil
		return nil
	}
	open := func(m *transcript.Message) {
		if cur != nil {
			return
		}
		model, prov := m.Model, provider(m.Agent)
		if model == "" {
			model = "unknown"
		}
		cur = &message{Role: "assistant", API: castAPI, Provider: prov, Model: model, Usage: &usage{}}
		curTime = when(m)
	}
	err = msgs.Each(func(_ int64, m *transcript.Message) error {
		if !repair.IsWritable(m) {
			return nil
		}
		switch m.Kind {
		case transcript.KindUser:
			if err := flush(); err != nil {
				return err
			}
			t := when(m)
			return push(entry{Type: "message", Message: &message{Role: "user", Content: contentBlocks(m.Text, m.Images), Timestamp: msTime(t)}}, t)
		case transcript.KindNotice:
			if err := flush(); err != nil {
				return err
			}
			if m.NoticeType == transcript.NoticeCompactionSummary {
				// pi's own summary message: pi sends it to the model as
				// the summary of what came before, as after its own /compact.
				t := when(m)
				return push(entry{Type: "message", Message: &message{Role: "compactionSummary", Summary: m.Text, Timestamp: msTime(t)}}, t)
			}
			// A custom entry stays on the chain but out of the model context.
			data, _ := json.Marshal(map[string]string{"noticeType": m.NoticeType, "text": m.Text})
			return push(entry{Type: "custom", CustomType: noticeType, Data: data}, when(m))
		case transcript.KindThinking, transcript.KindAssistant:
			if len(curCalls) > 0 {
				if err := flush(); err != nil {
					return err
				}
			}
			open(m)
			if m.Kind == transcript.KindThinking {
				curBlocks = append(curBlocks, thinkingBlock{Type: "thinking", Thinking: m.Text + thinkingSep})
			} else {
				curBlocks = append(curBlocks, textBlock{Type: "text", Text: m.Text})
			}
		case transcript.KindToolCall:
			tc := m.ToolCall
			if written[tc.ID] {
				return nil // a repeated call id would pair one result twice
			}
			written[tc.ID] = true
			open(m)
			curBlocks = append(curBlocks, toolCallBlock{Type: "toolCall", ID: tc.ID, Name: repair.ToolName(tc.Name), Arguments: repair.ArgsObject(tc.Input)})
			curCalls = append(curCalls, *tc) // a copy: m is the source's only while it is read
		case transcript.KindToolResult:
			if index.Calls[m.ToolResult.CallID] {
				for _, c := range curCalls {
					if c.ID == m.ToolResult.CallID {
						return flush() // answered: what follows is a new message
					}
				}
				return nil // written right after its call
			}
			if err := flush(); err != nil {
				return err
			}
			t := when(m)
			return push(entry{Type: "message", Message: &message{Role: "user", Content: textBlocks(repair.OrphanResultText(m.ToolResult)), Timestamp: msTime(t)}}, t)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
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
