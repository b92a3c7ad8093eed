// Package transcript is cast's neutral conversation model: the one copy of a
// session that every agent's native transcript is rendered from and read back
// into. It does no I/O and knows nothing of etcd, gRPC or any agent format.
package transcript

import (
	"fmt"
	"time"
)

// DefaultMaxMessageBytes is the largest message, encoded, a store takes
// unless configured otherwise (store.Config's default). What sends
// messages fits them to it until a refusal names another limit.
const DefaultMaxMessageBytes = 8 << 20

// Kind says what a message is. The zero value is invalid on purpose so a
// forgotten field is caught by Validate.
type Kind int

const (
	KindUnspecified Kind = iota
	KindUser             // text a person (or cast on their behalf) sent
	KindAssistant        // text the model answered with
	KindThinking         // the model's reasoning, kept but optional for targets
	KindToolCall         // the model asked to run a tool
	KindToolResult       // what the tool returned
	KindNotice           // a divider cast draws (switch, handoff, merge, ...)
	KindInternal         // server-only bookkeeping, never rendered natively
)

var kindNames = [...]string{"unspecified", "user", "assistant", "thinking", "tool_call", "tool_result", "notice", "internal"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s && i != 0 {
			return Kind(i), nil
		}
	}
	return KindUnspecified, fmt.Errorf("transcript: unknown message kind %q", s)
}

// Notice subtypes. Notices are never content: a transition decision or a
// slice ignores them.
const (
	NoticeAgentSwitch       = "agent_switch"
	NoticeHandoff           = "handoff"
	NoticeMerge             = "merge"
	NoticeMigration         = "migration"
	NoticeAccountSwitch     = "account_switch"
	NoticeFork              = "fork"
	NoticeCompactionSummary = "compaction_summary"
	NoticeModelSwitch       = "model_switch"
	// NoticeWorkspace: the thread moved to another folder (`cast workspace
	// set`, a removed worktree), or its worktree's setup ran.
	NoticeWorkspace = "workspace"
	// NoticeAccountChoice: a usage limit under the ask policy; the session
	// waits for a person's choice (`cast account approve|deny|use`).
	NoticeAccountChoice = "account_choice"
	// NoticeUndelivered: a turn's messages never reached the agent (it
	// failed or refused them); later turns run without them.
	NoticeUndelivered = "undelivered"
	// NoticeCommandOutput: what a command the agent ran itself printed (a
	// slash command such as Claude Code's /compact, which may call no
	// model), shown to the user in place of an answer.
	NoticeCommandOutput = "command_output"
)

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input string `json:"input,omitempty"` // JSON text as the agent sent it
}

// ToolResult is what came back for a ToolCall.
type ToolResult struct {
	CallID   string `json:"call_id"`
	Output   string `json:"output"`
	IsError  bool   `json:"is_error,omitempty"`
	ExitCode *int32 `json:"exit_code,omitempty"` // nil when the tool has no exit code
}

// Message is one row of the neutral transcript.
type Message struct {
	Seq      int64  `json:"seq,omitempty"`       // dense, 1-based, assigned by the control plane
	ClientID string `json:"client_id,omitempty"` // makes appends idempotent
	Kind     Kind   `json:"kind"`
	Text     string `json:"text,omitempty"` // user/assistant/thinking/notice body

	ToolCall   *ToolCall   `json:"tool_call,omitempty"`
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	// Images a user message carries, or a tool result returned, after its
	// text; only those two kinds carry any.
	Images []Image `json:"images,omitempty"`

	NoticeType string `json:"notice_type,omitempty"` // one of the Notice* constants

	Agent    string    `json:"agent,omitempty"`
	Model    string    `json:"model,omitempty"`
	Account  string    `json:"account,omitempty"`
	NativeID string    `json:"native_id,omitempty"` // the id in the native transcript it came from
	Time     time.Time `json:"time,omitempty"`
}

// Validate reports the first structural problem with m.
func (m *Message) Validate() error {
	if len(m.Images) > 0 && m.Kind != KindUser && m.Kind != KindToolResult {
		return fmt.Errorf("transcript: %s message carries images", m.Kind)
	}
	for _, im := range m.Images {
		if err := im.Validate(); err != nil {
			return err
		}
	}
	switch m.Kind {
	case KindUser, KindAssistant, KindThinking, KindInternal:
		if m.ToolCall != nil || m.ToolResult != nil {
			return fmt.Errorf("transcript: %s message carries tool fields", m.Kind)
		}
	case KindNotice:
		if m.NoticeType == "" {
			return fmt.Errorf("transcript: notice without a notice_type")
		}
	case KindToolCall:
		if m.ToolCall == nil || m.ToolCall.ID == "" || m.ToolCall.Name == "" {
			return fmt.Errorf("transcript: tool_call needs an id and a name")
		}
	case KindToolResult:
		if m.ToolResult == nil || m.ToolResult.CallID == "" {
			return fmt.Errorf("transcript: tool_result needs a call_id")
		}
	default:
		return fmt.Errorf("transcript: message has no valid kind (%d)", int(m.Kind))
	}
	return nil
}

// IsContent reports whether m counts as conversation content: notices and
// internal rows do not.
func (m *Message) IsContent() bool {
	return m.Kind != KindNotice && m.Kind != KindInternal && m.Kind != KindUnspecified
}

// Rendered reports whether m may appear in a native transcript.
func (m *Message) Rendered() bool { return m.Kind != KindInternal && m.Kind != KindUnspecified }
