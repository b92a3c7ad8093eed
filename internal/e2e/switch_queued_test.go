package e2e

import (
	"fmt"
	"slices"
	"syscall"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A switch to another agent while a sent message waits for its turn to
// start (the session idle, as between a stopped turn and the queued one,
// its node held at node.turn-start) hands the message to the new agent,
// which answers it without another message. The switch interrupted the
// turn about to start: it ended unstarted (last turn interrupted), its
// message counted delivered and unanswered until the next message.
func TestSwitchBeforeAQueuedTurnStarts(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
	m := func(n int) string { return fmt.Sprintf("MARK-SBQ-%d.", n) }
	id := r.create("claude", dmsg(m(1)))
	r.stopAtNextTurnStart()
	s2 := r.send(id, dmsg(m(2)))
	r.waitStoppedAtTurnStart("the queued turn held before its start is recorded")
	r.switchTo(id, "codex")
	r.node.Signal(syscall.SIGCONT)
	r.waitDelivered(id, "the queued message's turn over", s2)
	s := r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, 0)
	if !slices.ContainsFunc(r.messages(id), func(msg *castv1.Message) bool {
		return msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && msg.Seq > s2 && msg.Agent == "codex"
	}) {
		t.Fatalf("the message queued at the switch was not answered on codex (last turn interrupted %v, delivered seq %d)", s.LastTurnInterrupted, s.DeliveredSeq)
	}
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
}
