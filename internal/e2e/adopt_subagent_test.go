package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The real Claude Code's Agent tool writes a subagent's run to a file of
// its own (<session>/subagents/agent-*.jsonl). The node adopts it as a
// worker of the session that started it: the adopted session, for a
// session the user ran in claude directly, and the cast session, for a
// turn cast ran; never as a session of its own.
func TestAdoptSubagentRuns(t *testing.T) {
	t.Parallel()
	r := newAdoptRig(t, "claude")
	r.fake.SetPolicy(func(req fakemodel.Request) fakemodel.Reply {
		for _, it := range req.Items {
			if it.Kind == fakemodel.KindText && it.Role == "user" && strings.Contains(it.Text, "ADOPT-SUBTASK") {
				return fakemodel.Reply{Text: "ADOPT-SUBDONE read"} // the subagent's own request
			}
			if it.Kind == fakemodel.KindToolResult && strings.Contains(it.Text, "ADOPT-SUBDONE") {
				return fakemodel.Reply{Text: "ADOPT-SUB-ANSWER the helper is done"}
			}
		}
		if strings.Contains(fakemodel.LastUserText(req.Items), "ADOPT-SPAWN") {
			return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Agent", Input: map[string]any{
				"description": "read notes", "prompt": "ADOPT-SUBTASK read the notes", "subagent_type": "general-purpose"}}}
		}
		return fakemodel.Reply{Text: "ADOPT-SUB-OTHER"}
	})
	// workerOf waits for the adopted session nested under parent to hold
	// the subagent's task and answer (adoption makes the session, then
	// appends the batch: it can be seen empty in between), and checks
	// every adopted run is a worker started by its parent's call.
	workerOf := func(t *testing.T, parent string) {
		t.Helper()
		var runs []*castv1.Session
		var texts []string
		defer func() {
			if t.Failed() {
				t.Logf("the run's session last held %q", texts)
			}
		}()
		testharness.WaitFor(t, time.Minute, "the subagent's run, task and answer, adopted under "+parent, func() bool {
			resp, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{IncludeSubagents: true, Filter: `origin = "native"`})
			runs = slices.DeleteFunc(resp.GetSessions(), func(s *castv1.Session) bool { return !strings.HasPrefix(s.Origin.GetNativeId(), "agent-") })
			i := slices.IndexFunc(runs, func(s *castv1.Session) bool { return s.ParentId == parent })
			if err != nil || i < 0 {
				return false
			}
			texts = texts[:0]
			for _, m := range r.messages(runs[i].Id) {
				texts = append(texts, m.Text)
			}
			all := strings.Join(texts, "\n")
			return strings.Contains(all, "ADOPT-SUBTASK") && strings.Contains(all, "ADOPT-SUBDONE")
		})
		for _, s := range runs {
			if s.ParentId == "" || !s.Subagent || !strings.HasPrefix(s.ParentCallId, "toolu_") {
				t.Fatalf("a subagent's run not adopted as a worker started by its parent's call: %s %q parent %q call %q (%s)", s.Id, s.Title, s.ParentId, s.ParentCallId, s.Origin.GetPath())
			}
		}
	}
	t.Run("a session run in claude directly", func(t *testing.T) {
		defer r.use(t)()
		r.direct("claude", agenttest.Cwd(t, r.homes["claude"], "direct-sub"), "ADOPT-SPAWN-1 ask a helper", agents.FormFresh, nil)
		parent := r.adopted("claude")
		if !strings.Contains(parent.Title, "ADOPT-SPAWN-1") {
			t.Fatalf("adopted %q, want the direct session", parent.Title)
		}
		workerOf(t, parent.Id)
	})
	t.Run("a turn cast ran", func(t *testing.T) {
		defer r.use(t)()
		sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "ADOPT-SPAWN-2 ask a helper"})
		if err != nil {
			t.Fatal(err)
		}
		waitSessionState(t, r.c, sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
		workerOf(t, sess.Id)
	})
}
