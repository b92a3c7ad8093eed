package muse

import "encoding/json"

// record is one line of a session log: an envelope around a payload.
type record struct {
	SchemaVersion int    `json:"schema_version"`
	ID            string `json:"id"`
	Stream        struct {
		Kind string `json:"kind"` // "session", or "task" for a subagent
		ID   string `json:"id"`
	} `json:"stream"`
	Sequence    *int64      `json:"sequence"`    // per stream
	RecordedAt  json.Number `json:"recorded_at"` // µs since the epoch
	PayloadType string      `json:"payload_type"`
	Payload     payload     `json:"payload"`
}

// valid reports whether the envelope has what the reader orders and
// filters by.
func (r record) valid() bool {
	return r.Stream.Kind != "" && r.Stream.ID != "" && r.Sequence != nil && r.PayloadType != ""
}

type payload struct {
	Kind   string `json:"kind"` // "metadata", "run", "task"
	RunID  string `json:"run_id"`
	Record struct {
		ModelID       string `json:"model_id"`
		WorkspaceRoot string `json:"workspace_root"`
	} `json:"record"` // metadata only
	Event *event `json:"event"` // run and task only
}

type event struct {
	Kind      string          `json:"kind"`
	Prompt    json.RawMessage `json:"prompt"` // started
	Text      json.RawMessage `json:"text"`   // reasoning / assistant message
	Model     json.RawMessage `json:"model"`  // model_completed
	MessageID string          `json:"message_id"`
	ToolCalls []toolCall      `json:"tool_calls"`
	BatchID   string          `json:"batch_id"` // the tool calls' message_id
	Results   []toolResult    `json:"results"`
}

type toolCall struct {
	ID        string          `json:"id"`      // provider item id (fc_…)
	CallID    string          `json:"call_id"` // what results refer to
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args"`      // JSON text in a string
	Arguments json.RawMessage `json:"arguments"` // accepted too; the samples use args
}

type toolResult struct {
	ToolCallIndex *int            `json:"tool_call_index"`
	ToolCallID    string          `json:"tool_call_id"`
	Text          json.RawMessage `json:"text"`
}
