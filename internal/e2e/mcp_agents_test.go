package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A node registers cast's MCP history tool in Gemini CLI (its isolated
// ~/.gemini/settings.json), OpenCode (OPENCODE_CONFIG_CONTENT) and pi (an
// extension that calls the tool through `cast mcp call`): the real
// CLI starts `cast mcp`, offers the tool (and not the permission tool, which
// is Claude's only) to the model, and a call to it runs headless, with no
// approval prompt, and returns the right page of the session's own thread.
func TestMCPHistoryToolInAgents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		agent, tool string // tool: the name the CLI gives the model
	}{
		{"gemini", "mcp_cast_history"},
		{"opencode", "cast_history"},
		{"pi", "cast_history"}, // through cast's pi extension: pi has no MCP client
	} {
		t.Run(tc.agent, func(t *testing.T) {
			r := newTurnRig(t, tc.agent)
			ctx := context.Background()
			cwd := t.TempDir()
			sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: tc.agent, Cwd: cwd, Text: "first question MARK-M1"})
			if err != nil {
				t.Fatal(err)
			}
			r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
			turns := r.fake.Turns()
			body := string(turns[len(turns)-1].Body)
			if !strings.Contains(body, `"`+tc.tool+`"`) || !strings.Contains(body, "Read earlier messages of this conversation") {
				t.Fatalf("%s was not offered cast's history tool:\n%s", tc.agent, clipBody(body))
			}
			if strings.Contains(body, "Ask the person running cast") {
				t.Fatalf("%s was offered the permission tool", tc.agent)
			}

			askHistory(t, r, sess.Id, tc.tool, "what did you answer first? MARK-M2")
			// The registration lives in the node's own folder, the agent's
			// isolated home or the environment, never in the user's checkout.
			for _, f := range []string{".gemini", "opencode.json", "opencode.jsonc", ".opencode", ".pi"} {
				if _, err := os.Stat(filepath.Join(cwd, f)); err == nil {
					t.Errorf("%s written into the checkout", f)
				}
			}
			if _, err := os.Stat(filepath.Join(r.homes[tc.agent], "cast-history.ts")); err == nil {
				t.Error("pi extension written into the agent's home")
			}

		})
	}
}

// askHistory has the model of session id (one user turn and its answer so
// far) call the history tool for the page before seq 3, one message: #2,
// the first answer; the fake then quotes the tool's result in its answer.
func askHistory(t *testing.T, r *turnRig, id, tool, prompt string) {
	t.Helper()
	r.fake.Enqueue(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: tool, Input: map[string]any{"before_seq": 3, "limit": 1}}})
	seq := r.send(id, prompt)
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	var answer string
	for _, m := range r.messages(id) {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			answer = m.Text
		}
	}
	t.Logf("answer after the %s call: %s", tool, answer)
	if !strings.Contains(answer, "FAKE: tool said") || !strings.Contains(answer, "#2 assistant:") || strings.Contains(answer, prompt) {
		t.Fatalf("%s call, last answer:\n%s", tool, answer)
	}
}

func clipBody(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}
