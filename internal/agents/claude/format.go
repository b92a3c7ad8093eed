// Package claude is Claude Code's agent: its registry entry (agent.go),
// driver, login rules and credential format, and the reader and writer of
// its native transcript: one JSONL file per session under
// $CLAUDE_CONFIG_DIR/projects/<slug(cwd)>/<id>.jsonl, a tree of records
// linked by uuid/parentUuid whose leaf-to-root chain is the conversation
// Claude sends to the model on --resume.
//
// The rules the writer follows come from running the real CLI (2.1.197) on
// hand-written files (see shared/research/realclient-claude-gemini.md): every
// line needs a timestamp; assistant messages need message.id (unique per
// turn, or lines get merged) and message.model (or the CLI hangs) and an
// array content; the chain must be single and unbroken with the leaf last;
// an unpaired tool_use drops its whole assistant turn and an unpaired
// tool_result is dropped.
package claude

import "encoding/json"

// Agent is the registry name stamped on messages read from Claude files.
const Agent = "claude"

// CLIVersion is written into records; it is the pinned CLI the writer is
// tested against.
const CLIVersion = "2.1.197"

// record is one line of a Claude Code transcript (the fields cast uses).
type record struct {
	Type              string          `json:"type"`
	Subtype           string          `json:"subtype,omitempty"`
	UUID              string          `json:"uuid,omitempty"`
	ParentUUID        *string         `json:"parentUuid"`
	LogicalParentUUID string          `json:"logicalParentUuid,omitempty"`
	IsSidechain       bool            `json:"isSidechain"`
	AgentID           string          `json:"agentId,omitempty"` // the subagent a record belongs to, or (main chain) whose result it carries
	IsMeta            bool            `json:"isMeta,omitempty"`
	IsCompactSummary  bool            `json:"isCompactSummary,omitempty"`
	IsAPIErrorMessage bool            `json:"isApiErrorMessage,omitempty"`
	UserType          string          `json:"userType,omitempty"`
	Cwd               string          `json:"cwd,omitempty"`
	SessionID         string          `json:"sessionId,omitempty"`
	Version           string          `json:"version,omitempty"`
	Timestamp         string          `json:"timestamp,omitempty"`
	Message           json.RawMessage `json:"message,omitempty"`
	Content           json.RawMessage `json:"content,omitempty"` // a system record's text
	ToolUseResult     json.RawMessage `json:"toolUseResult,omitempty"`
	Attachment        *struct {
		Type string `json:"type"`
	} `json:"attachment,omitempty"`
}

// apiMessage is the Anthropic Messages API message inside a record.
type apiMessage struct {
	ID         string          `json:"id,omitempty"`
	Type       string          `json:"type,omitempty"`
	Role       string          `json:"role"`
	Model      string          `json:"model,omitempty"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason,omitempty"`
}

// block is one content block (the union of the kinds cast reads).
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Source    *imageSource    `json:"source,omitempty"` // image
}

// imageSource is an image block's bytes: base64 data (what Claude Code
// writes for a pasted image or a screenshot its Read tool took), or a URL
// or file id, which carry no bytes.
type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
}
