package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Claude Code, run by a node, calls cast's MCP history tool and gets the
// right page of its own thread as the tool result.
func TestAgentCallsHistoryTool(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first question MARK-H1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, "second question MARK-H2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	// The model asks for the page before seq 3, one message: #2.
	r.fake.Enqueue(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "mcp__cast__history", Input: map[string]any{"before_seq": 3, "limit": 1}}})
	seq = r.send(sess.Id, "what did you answer first? MARK-H3")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	var result string
	for _, m := range r.messages(sess.Id) {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT {
			result = m.ToolResult.GetOutput()
		}
	}
	if !strings.Contains(result, "#2 assistant:") || strings.Contains(result, "MARK-H2") || !strings.Contains(result, "before_seq=2") {
		t.Fatalf("history tool result:\n%s", result)
	}
}
