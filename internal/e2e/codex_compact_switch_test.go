package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Codex compacts its history mid-turn (the model reports a prompt past its
// window): it goes on with the user's messages kept verbatim beside a
// summary that does not restate them. A switch to Claude Code after that
// rebuilds from the summary on, and the next agent's request holds every
// message the user sent once, and so does Codex's after the switch back.
// The summary is stored once, as a notice (Codex records the model's
// answer to its compaction prompt as an assistant message too).
func TestCodexCompactionThenSwitch(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "codex", "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-CXC-%d", n) }
	id := r.create("codex", dmsg(m(1)))
	seq := r.send(id, dmsg(m(2)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	summaries := r.compactOn(id, dmsg(m(3)), fakemodel.Reply{Shell: "echo compacting", InputTokens: 1_000_000})
	if len(summaries) != 1 {
		t.Fatalf("%d compaction summaries stored, want 1 (Codex did not compact)", len(summaries))
	}
	// The model's answer to the compaction prompt is the summary, stored
	// once, as the notice.
	for _, msg := range r.messages(id) {
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && strings.Contains(summaries[0], strings.TrimSpace(msg.Text)) {
			t.Fatalf("the compaction summary is stored as an answer too (#%d): %q", msg.Seq, msg.Text)
		}
	}
	seq = r.send(id, dmsg(m(4)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	r.eachHoldsAll(t, id, m, 5, "claude", "codex")
}

// compactOn runs a turn of text whose first answer is big, a tool call
// reporting a near-full window (the CLI compacts then), and returns the
// session's compaction summaries once it is idle.
func (r *turnRig) compactOn(id, text string, big fakemodel.Reply) []string {
	r.t.Helper()
	r.fake.Enqueue(big)
	seq := r.send(id, text)
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	return r.summaries(id)
}

// summaries are the texts of the session's compaction summary notices.
func (r *turnRig) summaries(id string) []string {
	var out []string
	for _, msg := range r.messages(id) {
		if msg.NoticeType == "compaction_summary" {
			out = append(out, msg.Text)
		}
	}
	return out
}

// eachHoldsAll has the session run a turn on each agent in turn (switched
// to it when another runs the session), mark m(first), m(first+1), ...,
// and checks that each turn's request holds every mark from m(1) on once.
func (r *turnRig) eachHoldsAll(t *testing.T, id string, m func(int) string, first int, agents ...string) {
	t.Helper()
	for k, agent := range agents {
		if s, err := r.c.Sessions.GetSession(t.Context(), &castv1.GetSessionRequest{Id: id}); err != nil || s.Agent != agent {
			r.switchTo(id, agent)
		}
		seq := r.send(id, dmsg(m(first+k)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
		var marks []string
		for n := 1; n <= first+k; n++ {
			marks = append(marks, m(n))
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(first+k)), marks...)
	}
}

// Codex's turn is interrupted while the model holds its compaction
// request; the next turn compacts as it begins, before it takes its
// prompt. The store held that prompt when it was sent, before the summary
// was read: a switch to Claude Code after it still carries the prompt, once,
// and so does one to OpenCode (which orders a session's messages by time).
func TestCodexCompactsAsATurnBeginsThenSwitch(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "codex", "claude", "opencode")
	m := func(n int) string { return fmt.Sprintf("MARK-CXB-%d", n) }
	id := r.create("codex", dmsg(m(1)))
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Shell: "echo compacting", InputTokens: 1_000_000}, fakemodel.Reply{Text: "held summary", Gate: gate})
	n := r.fake.TurnsStarted()
	seq := r.send(id, dmsg(m(2)))
	testharness.WaitFor(t, 2*time.Minute, "the compaction request reaches the model", func() bool { return r.fake.TurnsStarted() >= n+2 })
	r.interrupt(id, seq)
	close(gate)
	r.eachHoldsAll(t, id, m, 3, "codex", "claude", "opencode")
}
