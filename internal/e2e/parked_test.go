package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A session parked on a usage limit runs nothing: its prompt waits for the
// next fleet credential or the next message. `cast interrupt` says there
// is nothing to stop (it sent the node an interrupt, "interrupt sent",
// which the node refused, it and the control plane each logging a
// warning), and the next message carries the parked prompt to the model
// once.
func TestInterruptOfAParkedSession(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-PRK-%d", n) }
	r.fake.FailNext(1, 429)
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", "a"), Node: "laptop", Text: dmsg(m(1))})
	if err != nil {
		t.Fatal(err)
	}
	parked := r.waitSession("parked on the usage limit", sess.Id, inState(castv1.SessionState_SESSION_STATE_PARKED))
	if out := r.cast.must("interrupt", sess.Id); !strings.Contains(out, "nothing to stop") {
		t.Fatalf("cast interrupt of a parked session: %q; want nothing to stop", out)
	}
	if parked.DeliveredSeq != 0 || parked.HeldSeq != 1 {
		t.Fatalf("parked session: delivered seq %d, held seq %d; want the prompt held (0 and 1)", parked.DeliveredSeq, parked.HeldSeq)
	}
	r.nextTurnHoldsOnce(sess.Id, m(2), m(1))
}

// A fleet credential wakes a parked session's held turn on its node, and
// the store shows the session parked until the node's report of the
// turn's start lands. A switch to another agent in that gap (the node
// held in it, stopped at its failpoint node.turn-start) sent no
// interrupt, since a parked session runs nothing, and the old agent ran
// the held prompt after the switch, writing its answer under the
// switch's divider. The start is refused instead (the store has the
// session on the new agent), and the new agent runs the prompt: answered
// once, on pi, and carried once by the next turn's request.
func TestSwitchOfAParkedSessionAsACredentialWakesIt(t *testing.T) {
	t.Parallel()
	r, c, _ := newFleetRigAgents(t, func(cfg *controlplane.Config) { cfg.Fleet.Policy = fleet.PolicyOff }, []string{"claude", "pi"})
	m := func(n int) string { return fmt.Sprintf("MARK-PSW-%d", n) }
	r.fake.RejectCredential(fleetTokA, 429)
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: dmsg(m(1))})
	if err != nil {
		t.Fatal(err)
	}
	id := sess.Id
	r.waitState(id, castv1.SessionState_SESSION_STATE_PARKED, 0)

	// Restarted, the node stops itself as its next turn is about to
	// report its start: the parked one, once a credential wakes it.
	r.node.Kill()
	r.startNodeEnv("CAST_FAILPOINTS=node.turn-start:stop")
	t.Cleanup(func() { r.node.Signal(syscall.SIGCONT) }) // a stopped node would not stop
	c.must("account", "use", "work-b", "--agent", "claude")
	testharness.WaitFor(t, 2*time.Minute, "the woken turn held before its start is recorded", func() bool {
		out := r.node.Output()
		return strings.Contains(out, "failpoint reached; stopping") && strings.Contains(out, "node.turn-start")
	})
	if s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id}); err != nil {
		t.Fatal(err)
	} else if s.State != castv1.SessionState_SESSION_STATE_PARKED || s.HeldSeq != 1 {
		t.Fatalf("while the woken turn waits to report its start: %v, held seq %d; want parked holding the prompt", s.State, s.HeldSeq)
	}
	r.switchTo(id, "pi")
	r.node.Signal(syscall.SIGCONT)

	waitAnswered(r, id, m(1), 1)
	for _, msg := range r.messages(id) {
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && msg.Agent != "pi" {
			t.Fatalf("answer %q written by %s after the switch to pi", msg.Text, msg.Agent)
		}
	}
	for _, req := range r.fake.Turns() {
		if req.Status == 200 && strings.Contains(string(req.Body), m(1)) && strings.Contains(req.Header.Get("Authorization"), fleetTokB) {
			t.Fatal("claude ran the parked prompt on the new credential after the switch to pi")
		}
	}
	seq := r.send(id, dmsg(m(2)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
}
