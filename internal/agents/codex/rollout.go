// Package codex is Codex CLI's agent: its registry entry (agent.go),
// driver, login rules and credential format. It reads and writes Codex CLI
// rollout files ($CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl)
// and drives `codex app-server` to import a conversation into a running
// Codex.
//
// The facts this code relies on were observed against Codex CLI 0.171.0 (see
// shared/research/realclient-codex-opencode.md): the rollout's response_item
// lines are what Codex replays to the model; event_msg lines are what its
// own UI shows; session_meta must come first and carry id, timestamp, cwd,
// originator and cli_version or the file is refused.
package codex

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Line types in a rollout envelope.
const (
	lineSessionMeta  = "session_meta"
	lineResponseItem = "response_item"
	lineEventMsg     = "event_msg"
	lineTurnContext  = "turn_context"
	lineCompacted    = "compacted"
)

// envelope is one rollout line: {"timestamp", "type", "payload"}. Files from
// before session_meta existed have neither type nor payload: the line itself
// is the item (see legacyItem).
type envelope struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// sessionMeta is the first line of every current rollout.
type sessionMeta struct {
	ID         string `json:"id"`
	Timestamp  string `json:"timestamp"`
	Cwd        string `json:"cwd"`
	Originator string `json:"originator"`
	CLIVersion string `json:"cli_version"`
	// Source is "cli", "exec", "vscode" or, for a spawned sub-agent, an
	// object; kept raw so an unexpected shape does not fail the line.
	Source json.RawMessage `json:"source,omitempty"`
}

// subagentOf reads session_meta's source: a thread Codex spawned for
// another is {"subagent":{"thread_spawn":{"parent_thread_id":…}}}, and its
// own runs (a review, a compaction, "other") {"subagent":"review"} or
// {"subagent":{"other":…}}. nil for a thread of its own ("cli", "exec").
func subagentOf(source json.RawMessage) *agents.Subagent {
	var src struct {
		Subagent json.RawMessage `json:"subagent"`
	}
	if len(source) == 0 || source[0] != '{' || json.Unmarshal(source, &src) != nil || len(src.Subagent) == 0 {
		return nil
	}
	s := &agents.Subagent{Kind: "subagent"}
	var name string
	var obj map[string]json.RawMessage
	switch {
	case json.Unmarshal(src.Subagent, &name) == nil:
		s.Kind = "subagent (" + name + ")"
	case json.Unmarshal(src.Subagent, &obj) == nil:
		if keys := slices.Sorted(maps.Keys(obj)); len(keys) > 0 {
			s.Kind = "subagent (" + keys[0] + ")"
		}
		var spawn struct {
			Parent string `json:"parent_thread_id"`
		}
		if json.Unmarshal(obj["thread_spawn"], &spawn) == nil {
			s.ParentNativeID = spawn.Parent
		}
	}
	return s
}

// item is a Responses API item as Codex stores it in a response_item
// payload (and as thread/inject_items takes it). One struct covers every
// variant cast reads or writes; unused fields stay empty.
type item struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`

	// message
	Role    string          `json:"role,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`

	// function_call, custom_tool_call, local_shell_call
	Name      string          `json:"name,omitempty"`
	Arguments argText         `json:"arguments,omitempty"`
	Input     string          `json:"input,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Action    json.RawMessage `json:"action,omitempty"`
	Status    string          `json:"status,omitempty"`

	// function_call_output, custom_tool_call_output
	Output json.RawMessage `json:"output,omitempty"`

	// reasoning
	Summary          json.RawMessage `json:"summary,omitempty"`
	EncryptedContent json.RawMessage `json:"encrypted_content,omitempty"`
}

// argText is a function_call's arguments: the JSON text Codex writes as a
// string. Other writers of rollouts put the object itself there; it is
// taken as its compact JSON text, the same call, instead of failing the
// whole item (and losing the call).
type argText string

// UnmarshalJSON implements json.Unmarshaler.
func (a *argText) UnmarshalJSON(raw []byte) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		*a = argText(s)
		return nil
	}
	if string(raw) == "null" {
		*a = ""
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return err
	}
	*a = argText(b.String())
	return nil
}

// contentPart is one entry of a message's content array.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"` // input_image: a data URL
}

// inputParts are text and the images after it as input parts. Empty text
// gets no part: Codex cannot read an input_text without its text (a
// Claude Read of a screenshot returns only the image), and on resume it
// silently drops an output line it cannot read, with its call.
func inputParts(text string, images []transcript.Image) []contentPart {
	var out []contentPart
	if text != "" {
		out = append(out, contentPart{Type: "input_text", Text: text})
	}
	return append(out, imageParts(images)...)
}

// imageParts are images as input_image parts.
func imageParts(images []transcript.Image) []contentPart {
	out := make([]contentPart, 0, len(images))
	for _, im := range images {
		out = append(out, contentPart{Type: "input_image", ImageURL: kit.DataURL(im)})
	}
	return out
}

// imagesOf are the images among content parts that carry their bytes (a
// data URL); skip hears of the others, which keep a placeholder in textOf.
func imagesOf(raw json.RawMessage, skip func(string)) []transcript.Image {
	var parts []contentPart
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []transcript.Image
	for _, p := range parts {
		if !strings.Contains(p.Type, "image") {
			continue
		}
		if im, err := kit.ParseDataURL(p.ImageURL); err == nil {
			out = append(out, im)
		} else if skip != nil {
			skip(kit.SkipImage)
		}
	}
	return out
}

// eventMsg is the subset of event_msg payloads cast reads and writes.
type eventMsg struct {
	Type    string          `json:"type"`
	Message string          `json:"message,omitempty"`
	Text    string          `json:"text,omitempty"`
	Item    json.RawMessage `json:"item,omitempty"` // item_completed
}

// completedItem is the item of an item_completed event: Codex 0.147 and
// some later builds write the UI's copy of a user or agent message this
// way instead of user_message/agent_message, with PascalCase types
// ("UserMessage", "AgentMessage") and content blocks whose type is "text"
// for one and "Text" for the other.
type completedItem struct {
	Type    string `json:"type"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// completedMessage is the kind and text of an item_completed event's user
// or agent message; ok is false for any other item (tool runs, file
// changes: the response_items carry those).
func completedMessage(raw json.RawMessage) (k transcript.Kind, text string, ok bool) {
	var it completedItem
	if len(raw) == 0 || json.Unmarshal(raw, &it) != nil {
		return 0, "", false
	}
	switch strings.ToLower(it.Type) {
	case "usermessage":
		k = transcript.KindUser
	case "agentmessage":
		k = transcript.KindAssistant
	default:
		return 0, "", false
	}
	var parts []string
	for _, c := range it.Content {
		if strings.EqualFold(c.Type, "text") && c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	return k, strings.Join(parts, "\n"), true
}

// turnContext carries per-turn settings; cast only reads the model.
type turnContext struct {
	Model string `json:"model"`
}

// compacted is a line Codex writes when it summarised earlier history.
type compacted struct {
	Message string `json:"message"`
	// ReplacementHistory is the history Codex goes on with: the user's
	// messages it kept verbatim, its own context, and the summary as a
	// user message.
	ReplacementHistory []json.RawMessage `json:"replacement_history"`
}

// textOf joins the text of a content value. Codex writes an array of parts;
// a bare string is accepted too so a hand-edited file still reads.
func textOf(raw json.RawMessage) string {
	if s, ok := kit.StringJSON(raw); ok {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		var cp struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL string `json:"image_url"`
		}
		if json.Unmarshal(p, &cp) != nil {
			continue
		}
		t := cp.Text
		if t == "" && strings.Contains(cp.Type, "image") && !hasImageBytes(cp.ImageURL) {
			t = "[image]" // carried as an image where its bytes are in the file (imagesOf)
		}
		if t == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(t)
	}
	return b.String()
}

// hasImageBytes says whether url is a data URL imagesOf can carry; only
// image parts pay for the decode.
func hasImageBytes(url string) bool {
	_, err := kit.ParseDataURL(url)
	return err == nil
}

// textShaped tells content textOf can read (nothing, a string, a list)
// from content of another shape, whose text would be lost unreported.
func textShaped(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null" || raw[0] == '"' || raw[0] == '['
}

// outputText turns a function_call_output's output into text. Codex stores a
// plain string, an array of content items, or (older versions) an object
// {"content": ..., "success": ...}; failed reports success:false.
func outputText(raw json.RawMessage) (text string, failed bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	if len(raw) > 0 && raw[0] == '[' {
		return textOf(raw), false
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
		Success *bool           `json:"success"`
	}
	if json.Unmarshal(raw, &obj) == nil && len(obj.Content) > 0 {
		return textOf(obj.Content), obj.Success != nil && !*obj.Success
	}
	return string(raw), false
}
