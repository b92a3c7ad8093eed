package grok

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// UpdatesFile is the session log Grok documents as what drives /resume:
// one Agent Client Protocol session/update notification per line.
const UpdatesFile = "updates.jsonl"

// updateLine is one updates.jsonl line.
type updateLine struct {
	Timestamp int64        `json:"timestamp"`
	Method    string       `json:"method"`
	Params    updateParams `json:"params"`
}

type updateParams struct {
	SessionID string         `json:"sessionId"`
	Update    update         `json:"update"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// update is the ACP SessionUpdate union, with the fields cast reads.
type update struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content,omitempty"` // a chunk's block; a tool_call_update's list
	ToolCallID    string          `json:"toolCallId,omitempty"`
	Title         string          `json:"title,omitempty"`
	Status        string          `json:"status,omitempty"` // tool_call_update: completed, failed
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
	RawOutput     json.RawMessage `json:"rawOutput,omitempty"`
	StopReason    string          `json:"stop_reason,omitempty"`
	Meta          updateMeta      `json:"_meta,omitzero"`
}

type updateMeta struct {
	ModelID     string    `json:"modelId,omitempty"`
	PromptIndex *int      `json:"promptIndex,omitempty"`
	Tool        *toolMeta `json:"x.ai/tool,omitempty"`
	// MessageID tells two messages of one kind in a row apart: chunks
	// are deltas, and consecutive chunks without it form one message.
	MessageID string `json:"messageId,omitempty"`
}

type toolMeta struct {
	Name string `json:"name"`
}

// toolContent is one item of a tool_call_update's content list.
type toolContent struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// DecodeUpdates reads updates.jsonl from r, a line at a time: chunks of
// one kind in a row are one message, a tool_call is a call and its
// completed or failed tool_call_update its result. Lines that are not
// JSON or not an update are counted and skipped.
func DecodeUpdates(r io.Reader) (Decoded, error) {
	var d Decoded
	used, n := 0, 0
	var lastID string
	err := kit.EachLine(r, func(line []byte) {
		n++
		var u updateLine
		if json.Unmarshal(line, &u) != nil || u.Params.Update.SessionUpdate == "" {
			d.Skipped++
			d.Kinds.Add("malformed line")
			return
		}
		used++
		if d.SessionID == "" {
			d.SessionID = u.Params.SessionID
		}
		lastID = d.addUpdate(u.Params.Update, fmt.Sprintf("U%d", n), lastID)
	})
	if err != nil {
		return d, err
	}
	if used == 0 && d.Skipped > 0 {
		return d, errors.New("grok: no session update found")
	}
	return d, nil
}

var chunkKinds = map[string]transcript.Kind{
	"user_message_chunk":  transcript.KindUser,
	"agent_message_chunk": transcript.KindAssistant,
	"agent_thought_chunk": transcript.KindThinking,
}

// quietUpdates carry no conversation: turn ends, plans, mode and command
// lists.
var quietUpdates = map[string]bool{"turn_completed": true, "plan": true, "current_mode_update": true,
	"available_commands_update": true, "session_info_update": true, "usage_update": true}

// addUpdate appends what u holds; last is the message id of the previous
// chunk, returned updated.
func (d *Decoded) addUpdate(u update, nid, last string) string {
	if kind, ok := chunkKinds[u.SessionUpdate]; ok {
		text := blockText(u.Content)
		if k := len(d.Messages) - 1; k >= 0 && d.Messages[k].Kind == kind && (u.Meta.MessageID == "" || u.Meta.MessageID == last) && last != "\x00" {
			d.Messages[k].Text += text
			return u.Meta.MessageID
		}
		m := transcript.Message{Kind: kind, Text: text, Agent: Agent, NativeID: nid}
		if kind != transcript.KindUser {
			m.Model = u.Meta.ModelID
		}
		d.Messages = append(d.Messages, m)
		return u.Meta.MessageID
	}
	switch u.SessionUpdate {
	case "tool_call":
		name := u.Title
		if u.Meta.Tool != nil && u.Meta.Tool.Name != "" {
			name = u.Meta.Tool.Name
		}
		input := "{}"
		if len(u.RawInput) > 0 {
			input = string(u.RawInput)
		}
		if u.ToolCallID == "" || name == "" {
			d.Kinds.Add(kindCallWithoutID)
			break
		}
		d.Messages = append(d.Messages, transcript.Message{Kind: transcript.KindToolCall, Agent: Agent, NativeID: nid,
			ToolCall: &transcript.ToolCall{ID: u.ToolCallID, Name: name, Input: input}})
	case "tool_call_update":
		// Updates while the tool runs (pending, in_progress) carry no
		// result yet; the completed or failed one does.
		if u.Status != "completed" && u.Status != "failed" {
			break
		}
		if u.ToolCallID == "" {
			d.Kinds.Add(kindResultWithoutID)
			break
		}
		d.Messages = append(d.Messages, transcript.Message{Kind: transcript.KindToolResult, Agent: Agent, NativeID: nid,
			ToolResult: &transcript.ToolResult{CallID: u.ToolCallID, Output: toolOutput(u), IsError: u.Status == "failed"}})
	default:
		if !quietUpdates[u.SessionUpdate] {
			d.Kinds.Add(u.SessionUpdate + " update")
		}
	}
	return "\x00" // anything else ends a run of chunks
}

// blockText is a content block's text (other blocks kept as their JSON).
func blockText(raw json.RawMessage) string {
	var b textPart
	if json.Unmarshal(raw, &b) == nil && b.Type == "text" {
		return b.Text
	}
	return contentText(raw)
}

// toolOutput is a tool_call_update's content text, else its raw output.
func toolOutput(u update) string {
	var items []toolContent
	if json.Unmarshal(u.Content, &items) == nil && len(items) > 0 {
		var parts []string
		for _, it := range items {
			if it.Type == "content" {
				parts = append(parts, blockText(it.Content))
			}
		}
		return strings.Join(parts, "")
	}
	return contentText(u.RawOutput)
}

// renderUpdates writes recs (chat records, already repaired) as the
// updates.jsonl Grok would have logged for them, stamped at ts.
func renderUpdates(sid string, recs []record, outcomes []toolEvent, ts time.Time) ([]byte, error) {
	failed := map[string]bool{}
	for _, o := range outcomes {
		failed[o.ToolCallID] = o.Outcome == "error"
	}
	var buf bytes.Buffer
	enc := kit.NewEncoder(&buf)
	msgs := 0
	emit := func(method string, u update) error {
		return enc.Encode(updateLine{Timestamp: ts.Unix(), Method: method, Params: updateParams{
			SessionID: sid, Update: u, Meta: map[string]any{"agentTimestampMs": ts.UnixMilli()}}})
	}
	chunk := func(kind, text string, meta updateMeta) error {
		msgs++
		meta.MessageID = "m" + strconv.Itoa(msgs)
		block, _ := json.Marshal(textPart{Type: "text", Text: text})
		return emit("session/update", update{SessionUpdate: kind, Content: block, Meta: meta})
	}
	turnOpen := false
	endTurn := func() error {
		if !turnOpen {
			return nil
		}
		turnOpen = false
		return emit("_x.ai/session/update", update{SessionUpdate: "turn_completed", StopReason: "end_turn"})
	}
	for _, r := range recs {
		var err error
		switch r.Type {
		case "user":
			if err = endTurn(); err != nil {
				return nil, err
			}
			turnOpen = true
			text := contentText(r.Content)
			if q, ok := userQuery(text); ok {
				text = q
			}
			err = chunk("user_message_chunk", text, updateMeta{PromptIndex: r.PromptIndex})
		case "assistant":
			turnOpen = true
			if text := contentText(r.Content); text != "" {
				err = chunk("agent_message_chunk", text, updateMeta{ModelID: r.ModelID})
			}
			for _, c := range r.ToolCalls {
				if err == nil {
					err = emit("session/update", update{SessionUpdate: "tool_call", ToolCallID: c.ID, Title: c.Name,
						RawInput: json.RawMessage(c.Arguments), Meta: updateMeta{Tool: &toolMeta{Name: c.Name}}})
				}
			}
		case "tool_result":
			status := "completed"
			if failed[r.ToolCallID] {
				status = "failed"
			}
			items, _ := json.Marshal([]toolContent{{Type: "content", Content: mustText(contentText(r.Content))}})
			err = emit("session/update", update{SessionUpdate: "tool_call_update", ToolCallID: r.ToolCallID, Status: status, Content: items})
		}
		if err != nil {
			return nil, err
		}
	}
	if err := endTurn(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func mustText(s string) json.RawMessage {
	b, _ := json.Marshal(textPart{Type: "text", Text: s})
	return b
}
