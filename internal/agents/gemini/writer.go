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

	n := 0 // records emitted
	emit := func(r *record) error {
		n++
		return emitRec(*r)
	}
	var cur *record
	curAnswered := false // a result of cur's calls came: the next call is a new turn
	written := map[string]bool{}
	times := kit.MessageTimes{Now: now}
	when := func(m *transcript.Message) string { return kit.ISOTime(times.Of(m)) }
	newRec := func(typ string, m *transcript.Message) *record {
		r := record{ID: repair.StableUUID(fmt.Sprintf("%s:%d", sid, n)), Type: typ, Timestamp: when(m)}
		if typ == "gemini" {
			r.Model = targetModel
			if m.Agent == Agent && m.Model != "" {
				r.Model = m.Model
			}
		}
		return &r
	}
	flush := func() error {
		curAnswered = false
		if cur == nil {
			return nil
		}
		if cur.Content == nil {
			cur.Content = json.RawMessage(`""`)
		}
		r := cur
		cur = nil
		return emit(r)
	}
	text := func(s string) json.RawMessage {
		b, _ := json.Marshal([]map[string]string{{"text": s}})
		return b
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
			r := newRec("user", m)
			if t := Escape(m.Text); len(m.Images) == 0 {
				r.Content = text(t)
			} else {
				r.Content, _ = json.Marshal(append([]part{{Text: &t}}, imageParts(m.Images)...))
			}
			return emit(r)
		case transcript.KindNotice:
			if err := flush(); err != nil {
				return err
			}
			if m.NoticeType == transcript.NoticeCompactionSummary {
				// The summary stands for what came before it: the model
				// must read it, as a user record in cast's notice tag.
				r := newRec("user", m)
				r.Content = text(kit.CastNotice.Wrap(m.NoticeType, m.Text))
				return emit(r)
			}
			// "info" records show in Gemini's UI and are never sent to the model.
			r := newRec("info", m)
			r.Content, _ = json.Marshal(noticeText(m))
			return emit(r)
		case transcript.KindThinking:
			if cur == nil || cur.Content != nil || len(cur.ToolCalls) > 0 {
				if err := flush(); err != nil {
					return err
				}
				cur = newRec("gemini", m)
			}
			cur.Thoughts = append(cur.Thoughts, thought{Description: m.Text, Timestamp: when(m)})
		case transcript.KindAssistant:
			if m.Text == "" {
				return nil
			}
			if cur == nil || cur.Content != nil || len(cur.ToolCalls) > 0 {
				if err := flush(); err != nil {
					return err
				}
				cur = newRec("gemini", m)
			}
			cur.Content, _ = json.Marshal(m.Text)
		case transcript.KindToolCall:
			tc := m.ToolCall
			if written[tc.ID] {
				return nil // a repeated call id would pair one result twice
			}
			written[tc.ID] = true
			if cur == nil || curAnswered {
				if err := flush(); err != nil {
					return err
				}
				cur = newRec("gemini", m)
			}
			var res transcript.Message // the call's first result, read again from where it is
			if pos, ok := index.Results[tc.ID]; ok {
				var err error
				if res, err = msgs.At(pos); err != nil {
					return err
				}
			}
			cur.ToolCalls = append(cur.ToolCalls, callRecord(tc, res.ToolResult, res.Images, when(m)))
		case transcript.KindToolResult:
			if index.Calls[m.ToolResult.CallID] {
				if cur != nil {
					for _, c := range cur.ToolCalls {
						curAnswered = curAnswered || c.ID == m.ToolResult.CallID
					}
				}
				return nil // written with its call
			}
			// A result whose call is not in the history: say so in plain
			// text rather than send a functionResponse the API rejects.
			if err := flush(); err != nil {
				return err
			}
			r := newRec("user", m)
			r.Content = text(repair.OrphanResultText(m.ToolResult))
			return emit(r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
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
