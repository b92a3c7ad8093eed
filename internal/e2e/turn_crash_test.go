package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node killed with -9 after a turn's CLI finished and its rows were
// stored, before the turn's outcome was recorded (the failpoint
// node.turn-before-outcome), runs the prompt again after its restart on a
// rebuilt native session: the real Claude's own session, which an earlier
// turn recorded, already holds the prompt and its answer, so resuming it
// would send the prompt twice in one request. Every model request holds
// each message at most once, in order, and the next message's request
// holds every earlier one.
func TestNodeKilledBeforeATurnsOutcomeSendsItsPromptOnce(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	// dmsg: the fake's answers, which quote the start of a message, never
	// hold its mark, so a mark counted in a request is the message.
	marks := []string{"CRASH-FIRST", "CRASH-SECOND", "CRASH-THIRD"}
	id := r.create("claude", dmsg(marks[0]))
	delivered := func(what string, seq int64) { t.Helper(); r.waitDelivered(id, what, seq) }
	delivered("the first turn done", 1)
	// The same node again, with the failpoint: the second turn's end kills it.
	r.node.Kill()
	r.startNodeEnv("CAST_FAILPOINTS=node.turn-before-outcome")
	seq := r.send(id, dmsg(marks[1]))
	r.waitFailpoint("node.turn-before-outcome")
	r.startNode()
	delivered("the second message delivered after the restart", seq)
	delivered("the third message answered", r.send(id, dmsg(marks[2])))
	assertEveryRequestOnce(t, r, marks)
}

// waitDelivered waits until the session is idle with seq delivered.
func (r *turnRig) waitDelivered(id, what string, seq int64) {
	r.t.Helper()
	// Six minutes, as waitSessionState's: a real CLI's turn under a
	// loaded run's other real-CLI tests.
	testharness.WaitFor(r.t, 6*time.Minute, what, func() bool {
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= seq
	})
}

// waitFailpoint waits until the rig's node died at the named failpoint.
func (r *turnRig) waitFailpoint(name string) {
	r.t.Helper()
	if code, ok := r.node.Wait(90 * time.Second); !ok || code == 0 {
		r.t.Fatalf("the node did not die at the failpoint (exit %d, exited %v)", code, ok)
	}
	if out := r.node.Output(); !strings.Contains(out, "failpoint reached") || !strings.Contains(out, name) {
		r.t.Fatalf("the node died elsewhere:\n%s", out)
	}
}

// assertEveryRequestOnce checks every model request the rig's fake got:
// each mark it holds appears once, in order, and the last request holds
// every mark.
func assertEveryRequestOnce(t *testing.T, r *turnRig, marks []string) {
	t.Helper()
	reqs := r.fake.Turns()
	for i, req := range reqs {
		var user strings.Builder
		for _, it := range req.Items {
			if it.Role == "user" {
				user.WriteString(it.Text)
			}
		}
		var held []string
		for _, mark := range marks {
			if i == len(reqs)-1 || strings.Contains(user.String(), mark) {
				held = append(held, mark)
			}
		}
		assertDeliveredOnce(t, req, held...)
	}
}

// A node killed when the turn a switch interrupted reaches its outcome
// (the failpoint node.turn-before-outcome): its state names pi's turn's
// markers while the session's agent is already Claude. pi wrote the
// message into its own session before asking the model, so the restart
// must rebuild pi's session too, not only the current agent's: switching
// back to pi later would otherwise send the message twice in one request,
// once in pi's history and once in the catch-up of what Claude did (the
// delivery model test's seed 74873965694130).
func TestNodeKilledAfterASwitchMidTurnSendsThePromptOnce(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "pi", "claude")
	marks := []string{"SWCRASH-FIRST", "SWCRASH-SECOND", "SWCRASH-THIRD"}
	id := r.create("pi", dmsg(marks[0]))
	delivered := func(what string, seq int64) { t.Helper(); r.waitDelivered(id, what, seq) }
	r.node.Kill()
	r.startNodeEnv("CAST_FAILPOINTS=node.turn-before-outcome")
	seq, release := r.sendHeld(id, dmsg(marks[1]))
	defer release()
	r.switchTo(id, "claude") // interrupts pi's turn; its end kills the node
	r.waitFailpoint("node.turn-before-outcome")
	r.startNode()
	delivered("the second message answered by Claude after the restart", seq)
	r.switchTo(id, "pi")
	delivered("the third message answered by pi", r.send(id, dmsg(marks[2])))
	assertEveryRequestOnce(t, r, marks)
}
