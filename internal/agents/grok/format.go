package grok

import "encoding/json"

// record is one chat_history.jsonl line.
type record struct {
	Type string `json:"type"`

	// user, system, assistant, tool_result
	Content json.RawMessage `json:"content,omitempty"`

	// user
	PromptIndex     *int   `json:"prompt_index,omitempty"`
	SyntheticReason string `json:"synthetic_reason,omitempty"`

	// reasoning
	ID      string        `json:"id,omitempty"`
	Summary []summaryPart `json:"summary,omitempty"`

	// assistant
	ModelID   string     `json:"model_id,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`

	// tool_result
	ToolCallID string `json:"tool_call_id,omitempty"`
}

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolCall carries its arguments as JSON encoded in a string.
type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// summary is summary.json.
type summary struct {
	Info struct {
		ID  string `json:"id"`
		Cwd string `json:"cwd"`
	} `json:"info"`
	SessionSummary    string `json:"session_summary"`
	GeneratedTitle    string `json:"generated_title,omitempty"`
	CreatedAt         string `json:"created_at,omitempty"`
	UpdatedAt         string `json:"updated_at,omitempty"`
	NumMessages       int    `json:"num_messages"`
	NumChatMessages   int    `json:"num_chat_messages"`
	CurrentModelID    string `json:"current_model_id"`
	ChatFormatVersion int    `json:"chat_format_version"`
	SessionKind       string `json:"session_kind,omitempty"`
	AgentName         string `json:"agent_name,omitempty"`
}
