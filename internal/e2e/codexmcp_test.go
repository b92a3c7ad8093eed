package e2e

import (
	"context"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A node registers cast's MCP history tool in Codex too (as -c
// mcp_servers overrides): the real codex starts `cast mcp` and offers the
// tool to the model; the permission tool is Claude's only.
func TestCodexGetsHistoryTool(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "codex")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: t.TempDir(), Text: "hello MARK-CX"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	turns := r.fake.Turns()
	body := string(turns[len(turns)-1].Body)
	if !strings.Contains(body, `"name":"mcp__cast"`) || !strings.Contains(body, "Read earlier messages of this conversation") {
		t.Fatal("codex was not offered cast's history tool")
	}
	if strings.Contains(body, "Ask the person running cast") {
		t.Fatal("codex was offered the permission tool")
	}
}
