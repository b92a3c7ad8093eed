package opencode

import (
	"fmt"

	"github.com/cast-dev/cast/internal/transcript"
)

// brief renders messages one per line so a whole transcript compares in one
// readable diff.
func brief(msgs []transcript.Message) []string {
	var out []string
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			out = append(out, fmt.Sprintf("tool_call %s %s %s", m.ToolCall.ID, m.ToolCall.Name, m.ToolCall.Input))
		case transcript.KindToolResult:
			ec := "-"
			if m.ToolResult.ExitCode != nil {
				ec = fmt.Sprint(*m.ToolResult.ExitCode)
			}
			out = append(out, fmt.Sprintf("tool_result %s exit=%s err=%v %s", m.ToolResult.CallID, ec, m.ToolResult.IsError, m.ToolResult.Output))
		case transcript.KindNotice:
			out = append(out, fmt.Sprintf("notice %s %s", m.NoticeType, m.Text))
		default:
			out = append(out, fmt.Sprintf("%s %s", m.Kind, m.Text))
		}
	}
	return out
}
