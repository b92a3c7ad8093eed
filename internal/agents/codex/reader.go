package codex

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Agent is the name cast records on messages read from Codex.
const Agent = "codex"

// Reader reads a rollout file into neutral messages.
type Reader struct {
	kit.CwdFileReader[rollout, Parsed]
}

// Parsed is a rollout read into neutral form plus what the file says about
// itself. What it left out (Kinds) are malformed lines and the record and
// item types of other Codex versions.
type Parsed struct {
	kit.Decoding
	SessionID string // session_meta.id (or the legacy header's id)
	Cwd       string
	Lines     int // non-blank lines seen
	Skipped   int // lines that were not a JSON object
	// Subagent is set when session_meta says another thread spawned this
	// one (source {"subagent":…}): the file is a subagent's run.
	Subagent *agents.Subagent
}

func (p *Parsed) skip(kind string) { p.Kinds.Add(kind) }

// bookkeeping are line types that carry no conversation (usage records,
// the environment snapshot); they are known, so not reported as skipped.
var bookkeeping = map[string]bool{"token_usage_record": true, "world_state": true}

// candidate is a message plus where it came from: Codex writes each user and
// assistant text twice (a response_item for the model, an event_msg for the
// UI) in current files, and only once, in either form, in older ones.
type candidate struct {
	msg       transcript.Message
	fromEvent bool
	// summary is a compacted record's own text: the model's answer to
	// Codex's compaction prompt, recorded just before as an assistant
	// message, is the summary, not an answer (answersCompaction).
	summary string
}

// answersCompaction reports whether c, the candidate just before a
// compacted record whose text is summary, is the model's answer to the
// compaction prompt: an assistant message the summary ends with.
func (c candidate) answersCompaction(summary string) bool {
	text := strings.TrimSpace(c.msg.Text)
	return !c.fromEvent && c.msg.Kind == transcript.KindAssistant && text != "" && strings.HasSuffix(strings.TrimSpace(summary), text)
}

func dedupKey(k transcript.Kind, text string) string {
	return fmt.Sprintf("%d\x00%s", k, strings.TrimSpace(text))
}

// rollout is the format Reader reads: Parse, and session_meta's cwd.
type rollout struct{}

func (rollout) Decode(r io.ReadSeeker) (Parsed, error) { return Parse(r) }
func (rollout) Cwd(p Parsed) string                    { return p.Cwd }

// Parse reads a rollout. Malformed lines are skipped and counted; the error
// is non-nil only when lines were present and none of them was readable.
// r is a ReadSeeker (never sought) so Parse fits kit.DecodeFile.
func Parse(r io.ReadSeeker) (Parsed, error) {
	var (
		p       Parsed
		cands   []candidate
		inItems = map[string]int{} // dedupKey -> count among response_items
		model   string
		names   = map[string]string{} // call_id -> tool name, for exit codes
		lineNo  int
	)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			lineNo++
			p.Lines++
			st := lineState{no: lineNo, model: &model, names: names, p: &p}
			cs, ok := st.parseLine(bytes.TrimSpace(raw))
			if !ok {
				p.Skipped++
				p.skip("malformed line")
			}
			for _, c := range cs {
				if n := len(cands); c.summary != "" && n > 0 && cands[n-1].answersCompaction(c.summary) {
					cands = cands[:n-1]
				}
				if !c.fromEvent && (c.msg.Kind == transcript.KindUser || c.msg.Kind == transcript.KindAssistant || c.msg.Kind == transcript.KindThinking) {
					inItems[dedupKey(c.msg.Kind, c.msg.Text)]++
				}
			}
			cands = append(cands, cs...)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return p, err
			}
			break
		}
	}
	for _, c := range cands {
		if c.fromEvent {
			k := dedupKey(c.msg.Kind, c.msg.Text)
			if inItems[k] > 0 {
				inItems[k]--
				continue
			}
		}
		p.Messages = append(p.Messages, c.msg)
	}
	if p.Lines > 0 && p.Skipped == p.Lines {
		return p, fmt.Errorf("codex: none of %d lines is a rollout record", p.Lines)
	}
	return p, nil
}

// lineState is what parsing one line needs from the file so far.
type lineState struct {
	no    int
	model *string
	names map[string]string
	p     *Parsed
}

// parseLine returns the candidates on one line and whether the line was a
// JSON object at all (unknown record types are fine: Codex adds new ones).
func (st lineState) parseLine(raw []byte) ([]candidate, bool) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return nil, false
	}
	var env envelope
	_ = json.Unmarshal(raw, &env)
	ts := kit.ParseTime(env.Timestamp)
	if _, hasPayload := probe["payload"]; !hasPayload {
		return st.legacyLine(raw, probe, ts), true
	}
	return st.record(env, ts), true
}

// legacyLine reads a line of a legacy file: a bare header
// {"id","timestamp"}, then bare items and the CLI's own state snapshots
// ({"record_type":"state"}).
func (st lineState) legacyLine(raw []byte, probe map[string]json.RawMessage, ts time.Time) []candidate {
	if _, typed := probe["type"]; !typed {
		_, state := probe["record_type"]
		switch {
		case st.p.SessionID == "" && st.no == 1:
			var h struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(raw, &h)
			st.p.SessionID = h.ID
		case !state:
			st.p.skip("untyped record")
		}
		return nil
	}
	it, ok := st.decodeItem(raw)
	if !ok {
		return nil
	}
	return st.fromItem(it, ts)
}

// record reads a rollout record, by its type.
func (st lineState) record(env envelope, ts time.Time) []candidate {
	switch env.Type {
	case lineSessionMeta:
		var m sessionMeta
		if json.Unmarshal(env.Payload, &m) != nil {
			st.p.skip(undecoded(env.Type))
		} else if st.p.SessionID == "" {
			st.p.SessionID, st.p.Cwd = m.ID, m.Cwd
			st.p.Subagent = subagentOf(m.Source)
		}
	case lineTurnContext:
		var tc turnContext
		if json.Unmarshal(env.Payload, &tc) != nil {
			st.p.skip(undecoded(env.Type))
		} else if tc.Model != "" {
			*st.model = tc.Model
		}
	case lineResponseItem:
		if it, ok := st.decodeItem(env.Payload); ok {
			return st.fromItem(it, ts)
		}
	case lineEventMsg:
		var ev eventMsg
		if json.Unmarshal(env.Payload, &ev) != nil {
			st.p.skip(undecoded(env.Type))
			return nil
		}
		return st.fromEvent(ev, ts)
	case lineCompacted:
		return st.compacted(env, ts)
	default:
		if !bookkeeping[env.Type] {
			st.p.skip(cmp.Or(env.Type, "untyped") + " record")
		}
	}
	return nil
}

// compacted reads a compacted record: the summary Codex replaced the
// history before it with.
func (st lineState) compacted(env envelope, ts time.Time) []candidate {
	var c compacted
	if json.Unmarshal(env.Payload, &c) != nil {
		st.p.skip(undecoded(env.Type))
		return nil
	}
	if strings.TrimSpace(c.Message) == "" {
		return nil
	}
	m := st.msg(transcript.KindNotice, ts)
	m.NoticeType, m.Text = transcript.NoticeCompactionSummary, transcript.WithKept(c.Message, st.keptUserTexts(c))
	return []candidate{{msg: m, summary: c.Message}}
}

// keptUserTexts are the user's messages in c's replacement history, but
// for the summary itself: Codex goes on with them beside its summary,
// which does not restate them (transcript.WithKept).
func (st lineState) keptUserTexts(c compacted) []string {
	var kept []string
	for _, raw := range c.ReplacementHistory {
		it, ok := st.decodeItem(raw)
		if !ok || (it.Type != "message" && it.Type != "") || it.Role != "user" || !textShaped(it.Content) {
			continue
		}
		text := textOf(it.Content)
		if strings.TrimSpace(text) == "" || isHarnessText(text) || text == c.Message {
			continue
		}
		kept = append(kept, text)
	}
	return kept
}

// decodeItem decodes a response item; one that does not decode is counted
// (by its type, when that much can be read) and ok is false.
func (st lineState) decodeItem(raw []byte) (it item, ok bool) {
	if json.Unmarshal(raw, &it) == nil {
		return it, true
	}
	var typed struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &typed)
	st.p.skip(undecoded(cmp.Or(typed.Type, "untyped") + " item"))
	return item{}, false
}

// undecoded is the report kind of a record of a known type that did not
// decode (a field of an unexpected JSON type, say).
func undecoded(what string) string { return what + " that did not decode" }

func (st lineState) msg(k transcript.Kind, ts time.Time) transcript.Message {
	m := transcript.Message{Kind: k, Agent: Agent, Time: ts, NativeID: fmt.Sprintf("line:%d", st.no)}
	switch k {
	case transcript.KindAssistant, transcript.KindThinking, transcript.KindToolCall:
		m.Model = *st.model
	}
	return m
}

func (st lineState) fromEvent(ev eventMsg, ts time.Time) []candidate {
	var k transcript.Kind
	text := ev.Message
	switch ev.Type {
	case "user_message":
		k = transcript.KindUser
	case "agent_message":
		k = transcript.KindAssistant
	case "agent_reasoning":
		k, text = transcript.KindThinking, ev.Text
	case "item_completed":
		var ok bool
		if k, text, ok = completedMessage(ev.Item); !ok {
			return nil
		}
	default:
		return nil
	}
	if strings.TrimSpace(text) == "" || (k == transcript.KindUser && isHarnessText(text)) {
		return nil
	}
	m := st.msg(k, ts)
	m.Text = text
	return []candidate{{msg: m, fromEvent: true}}
}

func (st lineState) fromItem(it item, ts time.Time) []candidate {
	switch it.Type {
	case "message", "":
		if it.Type == "" && it.Role == "" {
			break
		}
		// The Responses API takes a message without its type ({role,
		// content}); other writers of rollouts write it so.
		return st.fromMessage(it, ts)
	case "reasoning":
		text := textOf(it.Summary)
		if text == "" {
			text = textOf(it.Content)
		}
		if strings.TrimSpace(text) == "" {
			return nil // encrypted only: nothing cast may show
		}
		m := st.msg(transcript.KindThinking, ts)
		m.Text = text
		return []candidate{{msg: m}}
	case "function_call":
		return st.call(it.CallID, it.Name, string(it.Arguments), ts)
	case "custom_tool_call":
		// Free-form input (apply_patch's patch text): kept as a JSON string
		// literal so the writer knows to render a custom_tool_call again.
		in, _ := json.Marshal(it.Input)
		return st.call(it.CallID, it.Name, string(in), ts)
	case "local_shell_call":
		id := it.CallID
		if id == "" {
			id = it.ID
		}
		return st.call(id, "local_shell", string(it.Action), ts)
	case "function_call_output", "custom_tool_call_output":
		if it.CallID == "" {
			st.p.skip("tool output without a call id")
			return nil
		}
		out, failed := outputText(it.Output)
		exit := exitCode(st.names[it.CallID], out)
		if text, code, ok := unwrapShellJSON(st.names[it.CallID], out); ok {
			out, exit = text, code
		} else if text, code, ok := unwrapRendered(st.names[it.CallID], out); ok {
			out, exit = text, code
		}
		m := st.msg(transcript.KindToolResult, ts)
		m.ToolResult = &transcript.ToolResult{CallID: it.CallID, Output: out, IsError: failed, ExitCode: exit}
		m.Images = imagesOf(it.Output, st.p.skip)
		return []candidate{{msg: m}}
	case "web_search_call":
		// Server-side tool with no output item: keep it as a call plus a
		// result so it stays a pair in every target.
		id := it.ID
		if id == "" {
			id = fmt.Sprintf("ws_line_%d", st.no)
		}
		cs := st.call(id, "web_search", string(it.Action), ts)
		r := st.msg(transcript.KindToolResult, ts)
		r.NativeID += "#result"
		r.ToolResult = &transcript.ToolResult{CallID: id, Output: "web search " + cmp.Or(it.Status, "completed")}
		return append(cs, candidate{msg: r})
	}
	st.p.skip(cmp.Or(it.Type, "untyped") + " item")
	return nil
}

func (st lineState) fromMessage(it item, ts time.Time) []candidate {
	if !textShaped(it.Content) {
		st.p.skip(undecoded(cmp.Or(it.Role, "roleless") + " message"))
		return nil
	}
	text := textOf(it.Content)
	var images []transcript.Image
	if it.Role == "user" {
		images = imagesOf(it.Content, st.p.skip)
	}
	if strings.TrimSpace(text) == "" && len(images) == 0 {
		return nil
	}
	switch it.Role {
	case "user":
		if isHarnessText(text) {
			return nil
		}
		m := st.msg(transcript.KindUser, ts)
		m.Text, m.Images = text, images
		return []candidate{{msg: m}}
	case "assistant":
		m := st.msg(transcript.KindAssistant, ts)
		m.Text = text
		return []candidate{{msg: m}}
	case "developer", "system":
		// Codex's own instructions and environment context are rebuilt on
		// every turn: known, not reported. Cast's notices come back.
		if typ, body, ok := kit.CastNotice.Unwrap(text); ok {
			m := st.msg(transcript.KindNotice, ts)
			m.NoticeType, m.Text = typ, body
			return []candidate{{msg: m}}
		}
	default:
		st.p.skip(cmp.Or(it.Role, "roleless") + " message")
	}
	return nil
}

func (st lineState) call(id, name, input string, ts time.Time) []candidate {
	if id == "" || name == "" {
		st.p.skip("tool call without an id or name")
		return nil
	}
	st.names[id] = name
	m := st.msg(transcript.KindToolCall, ts)
	m.ToolCall = &transcript.ToolCall{ID: id, Name: name, Input: input}
	return []candidate{{msg: m}}
}
