package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/fence"
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
	m := func(n int) string { return fmt.Sprintf("MARK-PSW-%d", n) }
	r, id := wokenBeforeItsStart(t, m(1), "claude", "pi")
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

// `cast interrupt` in the same gap (a credential woke the parked turn, its
// start not recorded yet) finds the session parked, running nothing, and
// says there is nothing to stop; the turn starts after it. That is the
// store's order, the one every client sees: the interrupt came before the
// turn existed, as if the credential had come a moment later, and an
// interrupt does not cancel a parked prompt (c0d14ff). The CLI has not run
// the prompt at the interrupt (the node starts it only once its start is
// recorded), so nothing ran that the interrupt could have stopped; a
// second `cast interrupt`, once the session shows running, stops it. The
// woken turn runs once, on the new credential, and the next turn's
// request carries its prompt once.
func TestInterruptOfAParkedSessionAsACredentialWakesIt(t *testing.T) {
	t.Parallel()
	m := func(n int) string { return fmt.Sprintf("MARK-PIW-%d", n) }
	r, id := wokenBeforeItsStart(t, m(1), "claude")
	if out, _, code := r.cast("", "interrupt", id); code != 0 || !strings.Contains(out, "nothing to stop") {
		t.Fatalf("cast interrupt while the woken turn waits to report its start: exit %d, %q; want nothing to stop", code, out)
	}
	for _, req := range r.fake.Turns() {
		if strings.Contains(req.Header.Get("Authorization"), fleetTokB) {
			t.Fatal("a model request on the new credential before the woken turn's start was recorded")
		}
	}
	r.node.Signal(syscall.SIGCONT)
	waitAnswered(r, id, m(1), 1)
	if tok := bearerOf(r, m(1)); tok != fleetTokB {
		t.Fatalf("the woken turn ran with %q, want the new credential", tok)
	}
	seq := r.send(id, dmsg(m(2)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
}

// wokenBeforeItsStart is a fleet node running agents (claude first) whose
// claude session, sent prompt, parked on the usage limit of account
// work-a; `cast account use work-b` woke the held turn, and the node is
// stopped (its failpoint node.turn-start) before the turn's start is
// recorded: the store still shows the session parked holding the prompt.
// The test continues the node with SIGCONT.
func wokenBeforeItsStart(t *testing.T, prompt string, agents ...string) (*turnRig, string) {
	t.Helper()
	r, c, _ := newFleetRigAgents(t, func(cfg *controlplane.Config) { cfg.Fleet.Policy = fleet.PolicyOff }, agents)
	r.fake.RejectCredential(fleetTokA, 429)
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: dmsg(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_PARKED, 0)

	// The parked turn is the next to start, once a credential wakes it.
	r.stopAtNextTurnStart()
	c.must("account", "use", "work-b", "--agent", "claude")
	r.waitStoppedAtTurnStart("the woken turn held before its start is recorded")
	s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	if s.State != castv1.SessionState_SESSION_STATE_PARKED || s.HeldSeq != 1 {
		t.Fatalf("while the woken turn waits to report its start: %v, held seq %d; want parked holding the prompt", s.State, s.HeldSeq)
	}
	return r, sess.Id
}

// `cast rm` takes a session parked on a usage limit (it runs nothing), and
// an archived session runs nothing after: when a fleet credential wakes
// the node's parked turns, the archived session's held prompt reached the
// model on the new credential, its answer stored in the archived session,
// which showed running and idle again. The store refuses the turn's start
// instead; the session stays archived, failed with the held prompt, and a
// session parked beside it runs as before.
func TestRemovedParkedSessionStaysStoppedWhenACredentialWakesIt(t *testing.T) {
	t.Parallel()
	m := func(n int) string { return fmt.Sprintf("MARK-PRM-%d", n) }
	r, c, _ := newFleetRigAgents(t, func(cfg *controlplane.Config) { cfg.Fleet.Policy = fleet.PolicyOff }, []string{"claude"})
	r.fake.RejectCredential(fleetTokA, 429)
	var ids []string
	for _, prompt := range []string{m(1), m(2)} {
		sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: dmsg(prompt)})
		must(t, err)
		r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_PARKED, 0)
		ids = append(ids, sess.Id)
	}
	gone, kept := ids[0], ids[1]
	if out := c.must("rm", gone); !strings.Contains(out, "archived "+gone) {
		t.Fatalf("cast rm of a parked session: %q", out)
	}
	c.must("account", "use", "work-b", "--agent", "claude")
	waitAnswered(r, kept, m(2), 1)
	var s *castv1.Session
	testharness.WaitFor(t, 3*time.Minute, "the archived session's held turn settled", func() bool {
		var err error
		s, err = r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: gone})
		return err == nil && s.State != castv1.SessionState_SESSION_STATE_PARKED && !fence.TurnInFlight(s)
	})
	for _, req := range r.fake.Turns() {
		if strings.Contains(string(req.Body), m(1)) && strings.Contains(req.Header.Get("Authorization"), fleetTokB) {
			t.Fatal("the archived session's held prompt reached the model on the new credential")
		}
	}
	if !s.Archived || s.State != castv1.SessionState_SESSION_STATE_FAILED || s.HeldSeq != 1 || s.DeliveredSeq != 0 {
		t.Fatalf("archived session after the wake: %v archived %v held seq %d delivered seq %d; want archived, failed holding the prompt",
			s.State, s.Archived, s.HeldSeq, s.DeliveredSeq)
	}
	for _, msg := range r.messages(gone) {
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			t.Fatalf("the archived session got an answer: %q", msg.Text)
		}
	}
}

// A switch to another agent hands a parked session's held prompt to the
// new agent, which runs it at once: the usage limit was the old agent's.
// The store kept the old agent's parked state and its 429's exit code:
// the switch answered parked (the prompt no longer held), and while the
// new agent ran the prompt `cast get` showed "state: running" beside
// "last error: exit 1", an error of no turn of the new agent's. The switch
// ends the held state (idle, its prompt queued for the new agent).
func TestSwitchOfAParkedSessionLeavesNoStaleError(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi")
	m := func(n int) string { return fmt.Sprintf("MARK-PSE-%d", n) }
	id := r.create("claude", dmsg(m(1)))
	r.fake.FailNext(1, 429)
	s2 := r.send(id, dmsg(m(2)))
	if s := r.waitState(id, castv1.SessionState_SESSION_STATE_PARKED, s2-1); s.LastExitCode == 0 || s.HeldSeq != s2 {
		t.Fatalf("parked: exit code %d, held seq %d; want the 429's failure holding seq %d", s.LastExitCode, s.HeldSeq, s2)
	}
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Text: "held answer", Gate: gate})
	n := r.fake.TurnsStarted()
	sw, err := r.c.Sessions.SwitchSession(context.Background(), &castv1.SwitchSessionRequest{SessionId: id, Agent: "pi"})
	must(t, err)
	if sw.State == castv1.SessionState_SESSION_STATE_PARKED || sw.LastExitCode != 0 || sw.StateReason != "" {
		t.Fatalf("the switch answered %v (%q), exit code %d; want the held state ended, no error of the old agent", sw.State, sw.StateReason, sw.LastExitCode)
	}
	testharness.WaitFor(t, 2*time.Minute, "the new agent's request reaches the model", func() bool { return r.fake.TurnsStarted() > n })
	r.waitState(id, castv1.SessionState_SESSION_STATE_RUNNING, 0)
	out, errOut, code := r.cast("", "get", id)
	if code != 0 || !regexp.MustCompile(`(?m)^state:\s+running$`).MatchString(out) || strings.Contains(out, "last error") || strings.Contains(out, "parked") {
		t.Fatalf("cast get while the new agent runs the held prompt: exit %d %q\n%s; want running, no last error", code, errOut, out)
	}
	close(gate)
	r.waitDelivered(id, "the held prompt answered on pi", s2)
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
}

// stopAtNextTurnStart restarts r's node so that it stops itself (SIGSTOP)
// as its next turn is about to report its start; the test continues it
// with SIGCONT.
func (r *turnRig) stopAtNextTurnStart() {
	r.node.Kill()
	r.startNodeEnv("CAST_FAILPOINTS=node.turn-start:stop")
	r.t.Cleanup(func() { r.node.Signal(syscall.SIGCONT) }) // a stopped node would not stop
}

// stopAtTurnEnd is stopAtNextTurnStart for the next turn's end: the
// node stops once its rows are stored, before its outcome is recorded.
func (r *turnRig) stopAtTurnEnd() {
	r.node.Kill()
	r.startNodeEnv("CAST_FAILPOINTS=node.turn-before-outcome:stop")
	r.t.Cleanup(func() { r.node.Signal(syscall.SIGCONT) })
}

// waitStoppedAtTurnStart waits until the node stopped at node.turn-start.
func (r *turnRig) waitStoppedAtTurnStart(what string) {
	r.t.Helper()
	r.waitStoppedAt("node.turn-start", what)
}

// waitStoppedAt waits until the node stopped at the failpoint named point.
func (r *turnRig) waitStoppedAt(point, what string) {
	r.t.Helper()
	testharness.WaitFor(r.t, 2*time.Minute, what, func() bool {
		out := r.node.Output()
		return strings.Contains(out, "failpoint reached; stopping") && strings.Contains(out, point)
	})
}
