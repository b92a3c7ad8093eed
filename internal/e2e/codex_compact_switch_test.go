package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
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
	r.fake.Enqueue(fakemodel.Reply{Shell: "echo compacting", InputTokens: 1_000_000})
	seq = r.send(id, dmsg(m(3)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	var summaries []string
	for _, msg := range r.messages(id) {
		if msg.NoticeType == "compaction_summary" {
			summaries = append(summaries, msg.Text)
		}
	}
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
