package store_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A turn's end report sets what the session shows of its last turn: an
// interrupted turn is no failure (its exit code, the CLI killed by the
// node's signal, is kept for clients that do not read the flag), kept
// while the next turn runs and replaced when it ends; a turn a move
// abandoned is kept as such (its prompt runs again) until a turn starts,
// whose start drops its exit code, the signal's, no turn's result; a
// failed or parked turn's held seq lasts as long as the failure (a parked
// one's was dropped, so a switch interrupted the parked session). The
// store kept only the exit code, which `cast get` showed as the last error
// ("exit 143") until the next turn ended.
func TestTurnEndSetsTheLastTurn(t *testing.T) {
	idle, running, failed := castv1.SessionState_SESSION_STATE_IDLE, castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_FAILED
	parked := castv1.SessionState_SESSION_STATE_PARKED
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	g := fence.Guard{Node: "n1", Token: c.Token}
	for _, step := range []struct {
		name            string
		report          fence.TurnState
		wantInterrupted bool
		wantExit        int32
		wantHeld        int64
		wantAbandoned   bool
	}{
		{"interrupted", fence.TurnState{State: idle, ExitCode: 143, Interrupted: true}, true, 143, 0, false},
		{"the next turn runs", fence.TurnState{State: running}, true, 143, 0, false},
		{"and ends", fence.TurnState{State: idle}, false, 0, 0, false},
		{"interrupted, killed", fence.TurnState{State: idle, ExitCode: -1, Interrupted: true}, true, -1, 0, false},
		{"failed holding its prompt", fence.TurnState{State: failed, Reason: "not logged in", ExitCode: 1, HeldSeq: 1}, false, 1, 1, false},
		{"failed again, refused", fence.TurnState{State: failed, Reason: "refused", ExitCode: 2}, false, 2, 0, false},
		{"held again", fence.TurnState{State: failed, Reason: "not logged in", ExitCode: 1, HeldSeq: 1}, false, 1, 1, false},
		{"its rerun runs", fence.TurnState{State: running}, false, 1, 0, false},
		{"parked holding its prompt", fence.TurnState{State: parked, Reason: "rate limited", ExitCode: 1, HeldSeq: 1}, false, 1, 1, false},
		{"the parked prompt runs again", fence.TurnState{State: running}, false, 1, 0, false},
		{"interrupt on a failure is no interrupt", fence.TurnState{State: failed, Reason: "x", ExitCode: 3, Interrupted: true}, false, 3, 0, false},
		{"abandoned by a move", fence.TurnState{State: idle, ExitCode: 143, Abandoned: true}, false, 143, 0, true},
		{"its prompt runs again", fence.TurnState{State: running}, false, 0, 0, false},
		{"abandoned again", fence.TurnState{State: idle, ExitCode: -1, Abandoned: true}, false, -1, 0, true},
		{"and its rerun ends", fence.TurnState{State: idle}, false, 0, 0, false},
		{"abandoned on a failure is no abandon", fence.TurnState{State: failed, Reason: "x", ExitCode: 3, Abandoned: true}, false, 3, 0, false},
	} {
		sess, err := s.SetState(ctx, c.Session.Id, g, step.report)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if sess.LastTurnInterrupted != step.wantInterrupted || sess.LastExitCode != step.wantExit || sess.HeldSeq != step.wantHeld || sess.LastTurnAbandoned != step.wantAbandoned {
			t.Fatalf("%s: last turn interrupted %v, last exit code %d, held seq %d, abandoned %v; want %v, %d, %d, %v", step.name,
				sess.LastTurnInterrupted, sess.LastExitCode, sess.HeldSeq, sess.LastTurnAbandoned, step.wantInterrupted, step.wantExit, step.wantHeld, step.wantAbandoned)
		}
	}
}

// A move that commits past a turn still in flight on a source that went
// away leaves the session idle with that turn abandoned: its prompt runs
// again on the destination, which `cast exec` waits for (it took the idle
// session for the turn's end). A session moved idle has no such turn.
func TestHandoverAbandonsATurnInFlight(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	for _, n := range []string{"n1", "n2"} {
		if _, err := s.RegisterNode(ctx, &castv1.Node{Name: n}, "test", 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, inFlight := range []bool{true, false} {
		c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		if inFlight {
			if _, err := s.SetState(ctx, c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING}); err != nil {
				t.Fatal(err)
			}
		}
		handover(t, s, c.Session.Id, "n1", c.Token, "n2")
		sess, err := s.GetSession(ctx, c.Session.Id)
		if err != nil {
			t.Fatal(err)
		}
		if sess.State != castv1.SessionState_SESSION_STATE_IDLE || sess.LastTurnAbandoned != inFlight {
			t.Fatalf("moved with a turn in flight %v: state %v, last turn abandoned %v; want idle, %v", inFlight, sess.State, sess.LastTurnAbandoned, inFlight)
		}
	}
}

// A turn's start names its agent, and the store records it only for the
// session's agent: a switch to another agent recorded first refuses the
// old agent's start (AGENT_SWITCHED), so its node runs the messages on the
// new agent. A parked session's switch sends no interrupt, and its node
// may have woken the held turn on a fleet credential as the switch came;
// that turn started on the old agent after the switch. A start that names
// no agent (a node older than the field) is not checked.
func TestTurnStartForASwitchedAgentIsRefused(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	c := newSession(t, s, "n1")
	id, g := c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}
	parked := fence.TurnState{State: castv1.SessionState_SESSION_STATE_PARKED, Reason: "rate limited", HeldSeq: 1}
	if _, err := s.SetState(ctx, id, g, parked); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSession(ctx, id, func(sess *castv1.Session) error { sess.Agent, sess.HeldSeq = "pi", 0; return nil }); err != nil {
		t.Fatal(err)
	}
	running := castv1.SessionState_SESSION_STATE_RUNNING
	_, err := s.SetState(ctx, id, g, fence.TurnState{State: running, Agent: "claude"})
	if e, ok := errs.As(err); !ok || e.Kind != errs.KindFailedPrecondition || e.Reason != errs.ReasonAgentSwitched {
		t.Fatalf("the old agent's start after a switch: %v; want FAILED_PRECONDITION %s", err, errs.ReasonAgentSwitched)
	}
	if sess, err := s.GetSession(ctx, id); err != nil || sess.State != parked.State {
		t.Fatalf("after the refused start: %v, %v; want the session as it was (parked)", sess.GetState(), err)
	}
	for _, agent := range []string{"pi", ""} {
		if _, err := s.SetState(ctx, id, g, fence.TurnState{State: running, Agent: agent}); err != nil {
			t.Fatalf("a start naming agent %q: %v", agent, err)
		}
	}
}

// An archived session starts no turn: `cast rm` takes a parked session
// (it runs nothing), and a fleet credential that woke its held turn later
// ran the prompt in the archived session. The start is refused
// (SESSION_ARCHIVED); the turn's failed end, holding the prompt, is not.
func TestTurnStartInAnArchivedSessionIsRefused(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	c := newSession(t, s, "n1")
	id, g := c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}
	if _, err := s.SetState(ctx, id, g, fence.TurnState{State: castv1.SessionState_SESSION_STATE_PARKED, Reason: "rate limited", HeldSeq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := archiveSession(ctx, s, id); err != nil {
		t.Fatal(err)
	}
	_, err := s.SetState(ctx, id, g, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING, Agent: c.Session.Agent})
	wantArchived(t, "a turn's start in an archived session", err)
	failed := fence.TurnState{State: castv1.SessionState_SESSION_STATE_FAILED, Reason: "refused", HeldSeq: 1}
	if sess, err := s.SetState(ctx, id, g, failed); err != nil || sess.State != failed.State || sess.HeldSeq != 1 || !sess.Archived {
		t.Fatalf("the refused turn's end: %v, %v; want failed, holding seq 1, archived", sess, err)
	}
}

// A start that names no agent comes from a node older than the field
// (v0.1: the version-skew window lets it run against this control
// plane). After a switch the store cannot tell whether that node took
// the switch's assignment before it started (it runs the new agent) or
// not (the old one): it records the start all the same. Refused, the
// turn would be held, and a v0.1 node tries a held turn again only at its
// next wake (a message, an assignment), which may never come: the
// acknowledged message would wait unanswered, against the delivery rule.
// Accepted, at worst the old agent answers one turn after the switch, its
// prompt delivered once, and the new agent's catch-up carries it once.
// The node's assignment is what the turn runs either way, and the turn's
// end moves the delivery cursor past the prompt.
func TestAgentlessTurnStartAfterASwitchIsRecorded(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	c := newSession(t, s, "n1")
	id, g := c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}
	idle, running := castv1.SessionState_SESSION_STATE_IDLE, castv1.SessionState_SESSION_STATE_RUNNING
	report := func(ts fence.TurnState) error { _, err := s.SetState(ctx, id, g, ts); return err }
	if _, err := s.Append(ctx, id, []*castv1.Message{userMsg("first")}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	must(t, report(fence.TurnState{State: running}))
	must(t, report(fence.TurnState{State: idle, DeliveredSeq: 1}))
	if _, err := s.UpdateSession(ctx, id, func(sess *castv1.Session) error { sess.Agent = "codex"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, id, []*castv1.Message{userMsg("after the switch")}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if err := report(fence.TurnState{State: running}); err != nil {
		t.Fatalf("an agent-less start after a switch: %v; want it recorded (a refused one waits for a wake that may never come)", err)
	}
	if sess, err := s.GetSession(ctx, id); err != nil || sess.State != running {
		t.Fatalf("after the agent-less start: %v, %v; want running", sess.GetState(), err)
	}
	must(t, report(fence.TurnState{State: idle, DeliveredSeq: 2}))
	if sess, err := s.GetSession(ctx, id); err != nil || sess.DeliveredSeq != 2 || sess.HeldSeq != 0 {
		t.Fatalf("after its end: delivered seq %d, held seq %d (%v); want the prompt delivered, nothing held", sess.GetDeliveredSeq(), sess.GetHeldSeq(), err)
	}
}
