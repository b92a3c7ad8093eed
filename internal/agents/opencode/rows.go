package opencode

import (
	"bytes"
	"cmp"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
)

// OpenCode's v2 store keeps a session as rows of session_v2 and
// session_message; third-party tools dump those rows as JSONL lines
// {"row": {...}, "table": "..."}. The shapes differ from the export: a user
// row has data.text, an assistant row data.content[] with text, reasoning
// and tool items (tool output under state.content[]).

type rowLine struct {
	Table string          `json:"table"`
	Row   json.RawMessage `json:"row"`
}

type sessionRow struct {
	ID        string `json:"id"`
	Directory string `json:"directory"`
	ParentID  string `json:"parent_id"`
}

type messageRow struct {
	ID          string `json:"id"`
	Seq         int64  `json:"seq"`
	Type        string `json:"type"`
	TimeCreated int64  `json:"time_created"`
	Data        struct {
		Text    string       `json:"text"`
		Content []rowContent `json:"content"`
		Model   struct {
			ID string `json:"id"`
		} `json:"model"`
		// Time.Completed is set when the model's step ends (or fails).
		Time struct {
			Completed int64 `json:"completed"`
		} `json:"time"`
	} `json:"data"`
}

// rowContent is an item of an assistant row: a text, a reasoning or a
// tool.
type rowContent struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	State json.RawMessage `json:"state"`
	Time  struct {
		Created   int64 `json:"created"`
		Completed int64 `json:"completed"`
	} `json:"time"`
}

type rowToolState struct {
	Status  string          `json:"status"`
	Input   json.RawMessage `json:"input"`
	Output  string          `json:"output"`
	Error   string          `json:"error"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Metadata json.RawMessage `json:"metadata"`
}

// parseRows reads JSONL rows; ok is false when no line was a row object.
func parseRows(data []byte) (Parsed, bool) {
	var p Parsed
	var msgs []messageRow
	lines := 0
	for _, ln := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		lines++
		var rl rowLine
		if json.Unmarshal(ln, &rl) != nil || len(rl.Row) == 0 {
			p.Skipped++
			p.skip("malformed line")
			continue
		}
		switch rl.Table {
		case "session_v2", "session":
			var s sessionRow
			switch {
			case json.Unmarshal(rl.Row, &s) != nil:
				p.skip(rl.Table + " row that did not decode")
			case p.SessionID == "":
				p.SessionID, p.Directory, p.ParentID = s.ID, s.Directory, s.ParentID
			}
		case "session_message":
			var m messageRow
			if json.Unmarshal(rl.Row, &m) != nil {
				p.skip("session_message row that did not decode")
				continue
			}
			msgs = append(msgs, m)
		default:
			p.skip(cmp.Or(rl.Table, "untyped") + " row")
		}
	}
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].Seq < msgs[j].Seq })
	for i, m := range msgs {
		// Only the last row can still stream: OpenCode completes an
		// assistant row when its step ends, or when the next one starts.
		streaming := i == len(msgs)-1 && m.Type == "assistant" && m.Data.Time.Completed == 0
		p.Messages = append(p.Messages, rowMessages(m, streaming, p.skip)...)
	}
	return p, lines > p.Skipped
}

// quietRows are session_message types that carry no conversation: a turn's
// end, a change of model or agent.
var quietRows = map[string]bool{"idle": true, "model-switched": true, "agent-switched": true}

// rowMessages are m's messages. In a streaming row (see parseRows) the
// last item, a text or a reasoning not completed, is the one OpenCode
// still writes at every delta: read mid-turn it is cut short, and it is
// left out (as the export reader leaves out an unfinished part).
func rowMessages(m messageRow, streaming bool, skip func(kind string)) []transcript.Message {
	base := transcript.Message{Agent: Agent, NativeID: m.ID, Time: ms(m.TimeCreated)}
	switch m.Type {
	case "user":
		if strings.TrimSpace(m.Data.Text) == "" {
			return nil
		}
		base.Kind, base.Text = transcript.KindUser, m.Data.Text
		return []transcript.Message{base}
	case "assistant":
		return stepMessages(m, base, streaming, skip)
	default:
		if !quietRows[m.Type] {
			skip(cmp.Or(m.Type, "untyped") + " message row")
		}
		return nil
	}
}

// stepMessages are the messages of an assistant row, one model step: its
// tool results come after every call, thinking and text the model
// produced in it (see messageParts).
func stepMessages(m messageRow, base transcript.Message, streaming bool, skip func(kind string)) []transcript.Message {
	var out, results []transcript.Message
	for i, c := range m.Data.Content {
		b := base
		b.Model = m.Data.Model.ID
		b.NativeID = m.ID + "#" + strconv.Itoa(i)
		if c.Time.Created > 0 {
			b.Time = ms(c.Time.Created)
		}
		switch c.Type {
		case "text", "reasoning":
			if strings.TrimSpace(c.Text) == "" || (streaming && i == len(m.Data.Content)-1 && c.Time.Completed == 0) {
				continue
			}
			b.Kind, b.Text = transcript.KindAssistant, c.Text
			if c.Type == "reasoning" {
				b.Kind = transcript.KindThinking
			}
			out = append(out, b)
		case "tool":
			call, res, ok := rowTool(b, c, skip)
			if !ok {
				continue
			}
			out = append(out, call)
			if res != nil {
				results = append(results, *res)
			}
		default:
			skip(cmp.Or(c.Type, "untyped") + " content")
		}
	}
	return append(out, results...)
}

// rowTool is the call of a tool item, b its message so far, and its
// result once the tool has ended; ok is false for an item that names no
// call.
func rowTool(b transcript.Message, c rowContent, skip func(kind string)) (call transcript.Message, res *transcript.Message, ok bool) {
	if c.ID == "" || c.Name == "" {
		skip("tool content without an id or name")
		return call, nil, false
	}
	var st rowToolState
	if len(c.State) > 0 && json.Unmarshal(c.State, &st) != nil {
		skip("tool state that did not decode")
	}
	call = b
	call.Kind = transcript.KindToolCall
	call.ToolCall = &transcript.ToolCall{ID: c.ID, Name: c.Name, Input: inputText(st.Input)}
	if st.Status != "completed" && st.Status != "error" {
		return call, nil, true
	}
	text := st.Output
	for _, ct := range st.Content {
		if ct.Type != "" && ct.Type != "text" {
			skip(ct.Type + " content of a tool result")
		}
		text += ct.Text
	}
	if st.Status == "error" && text == "" {
		text = st.Error
	}
	r := b
	r.Kind, r.NativeID = transcript.KindToolResult, b.NativeID+"#result"
	r.Model = ""
	r.ToolResult = &transcript.ToolResult{CallID: c.ID, Output: text, IsError: st.Status == "error", ExitCode: exitOf(st.Metadata)}
	return call, &r, true
}
