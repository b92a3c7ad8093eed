package gemini

import (
	"bufio"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
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
	if err := t.Check("gemini"); err != nil {
		return agents.Written{}, err
	}
	now, sid := kit.Clock(w.Now), t.StableID("gemini")
	cwd := filepath.Clean(t.Cwd)
	// The records are encoded to the file as they are rendered, never all
	// held: a 400 MB session would otherwise sit in memory as records and
	// again as the file's bytes (issue 27). The header, written first,
	// needs the first record's time, so that one is pulled ahead.
	next, stop := iter.Pull(render(sid, t.Model, msgs, now()))
	defer stop()
	first, have := next()

	// lastUpdated is when cast wrote the file, not its last message: Gemini's
	// start-up cleanup (general.sessionRetention, 30 days by default)
	// deletes a session whose lastUpdated is older, so a conversation
	// imported or idle for a month would vanish at the next Gemini start in
	// its folder.
	start, last := now(), now()
	if have {
		start, _ = time.Parse(time.RFC3339Nano, first.Timestamp)
	}
	slug, err := projectSlug(t.Home, cwd)
	if err != nil {
		return agents.Written{}, err
	}
	dir := filepath.Join(t.Home, "tmp", slug, "chats")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agents.Written{}, err
	}
	path := existingFile(dir, sid)
	if path == "" {
		short := strings.ReplaceAll(sid, "/", "_")
		if len(short) > 8 {
			short = short[:8]
		}
		path = filepath.Join(dir, "session-"+start.UTC().Format("2006-01-02T15-04")+"-"+short+".jsonl")
	}

	recs := func(yield func(record) bool) {
		for r, ok := first, have; ok; r, ok = next() {
			if !yield(r) {
				return
			}
		}
	}
	return kit.StreamJSONL(path, sid, header{
		SessionID:   sid,
		ProjectHash: projectHash(cwd),
		StartTime:   stamp(start),
		LastUpdated: stamp(last),
		Kind:        "main",
		// Without a summary the picker (/resume) asks the model for one
		// and shows its answer; the first request is the sensible title.
		Summary: agents.Title(msgs, 80),
	}, iter.Seq[record](recs))
}

// existingFile finds the file of a session being rewritten, so a rewrite
// replaces it instead of leaving two files with one session id.
func existingFile(dir, sid string) string {
	if len(sid) < 8 {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "session-*-"+sid[:8]+".jsonl"))
	for _, m := range matches {
		if firstLineSession(m) == sid {
			return m
		}
	}
	return ""
}

// firstLineSession reads the session id from a file's header line only.
func firstLineSession(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	var h header
	if json.Unmarshal(line, &h) != nil {
		return ""
	}
	return h.SessionID
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// render maps neutral messages to Gemini records, yielded one at a time
// so the writer can encode each and let it go. One "gemini" record is
// one model turn: its thoughts, then its text, then its tool calls, each
// carrying its result (Gemini replays results from there).
func render(sid, targetModel string, msgs []transcript.Message, now time.Time) iter.Seq[record] {
	return func(yield func(record) bool) {
		renderTo(sid, targetModel, msgs, now, yield)
	}
}

// renderTo is render's body: it yields records until yield says stop.
func renderTo(sid, targetModel string, msgs []transcript.Message, now time.Time, yield func(record) bool) {
	results, calls := repair.IndexCalls(msgs)
	resultImages := repair.ResultImages(msgs)

	n, stopped := 0, false // records yielded; the consumer wants no more
	emit := func(r *record) {
		if !stopped {
			n++
			stopped = !yield(*r)
		}
	}
	var cur *record
	curAnswered := false // a result of cur's calls came: the next call is a new turn
	written := map[string]bool{}
	lastTime := time.Time{}
	when := func(m *transcript.Message) string {
		t := m.Time
		if t.IsZero() {
			t = lastTime
		}
		if t.IsZero() {
			t = now
		}
		lastTime = t
		return stamp(t)
	}
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
	flush := func() {
		if cur != nil {
			if cur.Content == nil {
				cur.Content = json.RawMessage(`""`)
			}
			emit(cur)
			cur = nil
		}
		curAnswered = false
	}
	text := func(s string) json.RawMessage {
		b, _ := json.Marshal([]map[string]string{{"text": s}})
		return b
	}
	for m := range repair.Writable(msgs) {
		if stopped {
			return
		}
		switch m.Kind {
		case transcript.KindUser:
			flush()
			r := newRec("user", m)
			if t := Escape(m.Text); len(m.Images) == 0 {
				r.Content = text(t)
			} else {
				r.Content, _ = json.Marshal(append([]part{{Text: &t}}, imageParts(m.Images)...))
			}
			emit(r)
		case transcript.KindNotice:
			flush()
			if m.NoticeType == transcript.NoticeCompactionSummary {
				// The summary stands for what came before it: the model
				// must read it, as a user record in cast's notice tag.
				r := newRec("user", m)
				r.Content = text(kit.CastNotice.Wrap(m.NoticeType, m.Text))
				emit(r)
				continue
			}
			// "info" records show in Gemini's UI and are never sent to the model.
			r := newRec("info", m)
			r.Content, _ = json.Marshal(noticeText(m))
			emit(r)
		case transcript.KindThinking:
			if cur == nil || cur.Content != nil || len(cur.ToolCalls) > 0 {
				flush()
				cur = newRec("gemini", m)
			}
			cur.Thoughts = append(cur.Thoughts, thought{Description: m.Text, Timestamp: when(m)})
		case transcript.KindAssistant:
			if m.Text == "" {
				continue
			}
			if cur == nil || cur.Content != nil || len(cur.ToolCalls) > 0 {
				flush()
				cur = newRec("gemini", m)
			}
			cur.Content, _ = json.Marshal(m.Text)
		case transcript.KindToolCall:
			tc := m.ToolCall
			if written[tc.ID] {
				continue // a repeated call id would pair one result twice
			}
			written[tc.ID] = true
			if cur == nil || curAnswered {
				flush()
				cur = newRec("gemini", m)
			}
			cur.ToolCalls = append(cur.ToolCalls, callRecord(tc, results[tc.ID], resultImages[tc.ID], when(m)))
		case transcript.KindToolResult:
			if calls[m.ToolResult.CallID] {
				if cur != nil {
					for _, c := range cur.ToolCalls {
						curAnswered = curAnswered || c.ID == m.ToolResult.CallID
					}
				}
				continue // written with its call
			}
			// A result whose call is not in the history: say so in plain
			// text rather than send a functionResponse the API rejects.
			flush()
			r := newRec("user", m)
			r.Content = text(repair.OrphanResultText(m.ToolResult))
			emit(r)
		}
	}
	flush()
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
