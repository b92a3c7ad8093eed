package e2e

import (
	"fmt"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Codex compacts its history mid-turn (the model reports a prompt past its
// window): it goes on with the user's messages kept verbatim beside a
// summary that does not restate them. A switch to Claude Code after that
// rebuilds from the summary on, and the next agent's request holds every
// message the user sent once, and so does Codex's after the switch back.
func TestCodexCompactionThenSwitch(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "codex", "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-CXC-%d", n) }
	id := r.create("codex", dmsg(m(1)))
	seq := r.send(id, dmsg(m(2)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	r.fake.Enqueue(fakemodel.Reply{Shell: "echo compacting", InputTokens: 1_000_000})
	seq = r.send(id, dmsg(m(3)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	summaries := 0
	for _, msg := range r.messages(id) {
		if msg.NoticeType == "compaction_summary" {
			summaries++
		}
	}
	if summaries != 1 {
		t.Fatalf("%d compaction summaries stored, want 1 (Codex did not compact)", summaries)
	}
	seq = r.send(id, dmsg(m(4)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	for k, agent := range []string{"claude", "codex"} {
		r.switchTo(id, agent)
		seq = r.send(id, dmsg(m(5+k)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
		var marks []string
		for n := 1; n <= 5+k; n++ {
			marks = append(marks, m(n))
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(5+k)), marks...)
	}
}
