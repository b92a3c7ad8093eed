package pi

import "encoding/json"

// header is line 1 of a session file.
type header struct {
	Type          string `json:"type"`
	Version       int    `json:"version,omitempty"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp,omitempty"`
	Cwd           string `json:"cwd,omitempty"`
	ParentSession string `json:"parentSession,omitempty"`
}

// entry is any other line. Fields beyond the base depend on Type.
type entry struct {
	Type      string  `json:"type"`
	ID        string  `json:"id,omitempty"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp,omitempty"`

	Message *message `json:"message,omitempty"` // type "message"

	Provider string `json:"provider,omitempty"` // model_change
	ModelID  string `json:"modelId,omitempty"`

	Summary          string `json:"summary,omitempty"` // compaction, branch_summary
	FirstKeptEntryID string `json:"firstKeptEntryId,omitempty"`
	TokensBefore     int    `json:"tokensBefore,omitempty"`
	FromID           string `json:"fromId,omitempty"`

	CustomType string          `json:"customType,omitempty"` // custom, custom_message
	Content    json.RawMessage `json:"content,omitempty"`    // custom_message
	Display    *bool           `json:"display,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"` // custom
}

// message is an AgentMessage: user, assistant, toolResult, bashExecution,
// custom, branchSummary or compactionSummary.
type message struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content,omitempty"`
	Timestamp json.RawMessage `json:"timestamp,omitempty"` // Unix ms, or ISO in hand-written files

	// assistant
	API          string `json:"api,omitempty"`
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	Usage        *usage `json:"usage,omitempty"`
	StopReason   string `json:"stopReason,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`

	// toolResult
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	IsError    *bool           `json:"isError,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`

	// bashExecution
	Command            string `json:"command,omitempty"`
	Output             string `json:"output,omitempty"`
	ExitCode           *int32 `json:"exitCode,omitempty"`
	Cancelled          bool   `json:"cancelled,omitempty"`
	ExcludeFromContext bool   `json:"excludeFromContext,omitempty"`

	// branchSummary, compactionSummary
	Summary string `json:"summary,omitempty"`
}

type usage struct {
	Input       int  `json:"input"`
	Output      int  `json:"output"`
	CacheRead   int  `json:"cacheRead"`
	CacheWrite  int  `json:"cacheWrite"`
	TotalTokens int  `json:"totalTokens"`
	Cost        cost `json:"cost"`
}

type cost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// block is one content block: text, thinking, toolCall or image.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Redacted  bool            `json:"redacted,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
	Data      string          `json:"data,omitempty"` // image: base64
}
