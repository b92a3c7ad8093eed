package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The agent's CLI killed -9 from outside the node mid-turn (the OOM
// killer, a user's kill), once before it sent the model its request (its
// start held) and once after the model answered but before the CLI read
// the answer (stopped, then killed): the CLI did not refuse the message,
// so the session leaves `running` and the next message's request holds
// the killed turn's message once, in order. The node used to settle such
// a turn as a refusal: the message was marked undelivered and never
// reached the agent again.
func TestAgentCLIKilledMidTurnKeepsItsMessage(t *testing.T) {
	t.Parallel()
	h, bins := newStartHold(t, "claude")
	r := newTurnRigBins(t, nil, bins, "claude")
	m := func(n int) string { return fmt.Sprintf("CLIKILL-%d", n) }
	id := r.create("claude", dmsg(m(1)))
	signal := func(sig syscall.Signal) {
		t.Helper()
		pids := agentPIDs(id)
		if len(pids) == 0 {
			t.Fatal("no process of the turn to signal")
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
	}
	// killed waits until the killed turn ended and checks it says so.
	killed := func(seq int64) {
		t.Helper()
		s := r.waitState(id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
		if !strings.Contains(s.StateReason, "killed") {
			t.Errorf("the killed turn's reason %q does not say the CLI was killed", s.StateReason)
		}
	}

	// Before the model request: the CLI's start is held, and killed.
	seq := r.sendHeldStart(h, id, dmsg(m(2)))
	signal(syscall.SIGKILL)
	h.release()
	killed(seq)
	r.waitDelivered(id, "the message after the kill before the request", r.send(id, dmsg(m(3))))
	assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))

	// After the model answered: the CLI is stopped while the model holds
	// its answer, the answer is written, and the CLI is killed before it
	// could read it.
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Text: "an answer the CLI never read", Gate: gate})
	n := r.fake.TurnsStarted()
	seq = r.send(id, dmsg(m(4)))
	testharness.WaitFor(t, 2*time.Minute, "the request reaches the model", func() bool { return r.fake.TurnsStarted() > n })
	signal(syscall.SIGSTOP)
	answered := len(r.fake.Turns())
	close(gate)
	testharness.WaitFor(t, time.Minute, "the model answers", func() bool { return len(r.fake.Turns()) > answered })
	signal(syscall.SIGKILL)
	killed(seq)
	r.waitDelivered(id, "the message after the kill after the answer", r.send(id, dmsg(m(5))))
	assertDeliveredOnce(t, requestWith(t, r.fake, m(5)), m(1), m(2), m(3), m(4), m(5))
}

// A node stopped (SIGSTOP) past its lease while its turn's CLI waits on
// the model: the control plane fails the turn; the answer comes and the
// CLI exits while the node sleeps; woken (SIGCONT), the node stores the
// late turn and its end. Each such message is answered once, by its late
// turn, the session is not left running, and the next request holds every
// message once. Twice: the old runner took the wake's interrupt over the
// CLI's exit at random (a select between two ready cases).
func TestNodeStoppedPastItsLeaseMidTurnAnswersOnce(t *testing.T) {
	t.Parallel()
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) { testharness.ShortLease(c) }, "claude")
	m := func(n int) string { return fmt.Sprintf("NODESTOP-%d", n) }
	id := r.create("claude", dmsg(m(1)))
	var held []int64
	for i := 2; i <= 3; i++ {
		seq, release := r.sendHeld(id, dmsg(m(i)))
		held = append(held, seq)
		cli := nodeChild(t, agentPIDs(id), r.node.Cmd.Process.Pid)
		r.node.Signal(syscall.SIGSTOP)
		r.waitState(id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
		release()
		testharness.WaitFor(t, time.Minute, "the CLI ends while its node sleeps", func() bool { return reapable(cli) })
		r.node.Signal(syscall.SIGCONT)
		r.waitDelivered(id, "the late turn recorded", seq)
	}
	next := r.send(id, dmsg(m(4)))
	r.waitDelivered(id, "the next message answered", next)
	assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
	held = append(held, next)
	msgs := r.messages(id)
	for i, seq := range held[:len(held)-1] {
		var answers []string
		for _, msg := range msgs {
			if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && msg.Seq > seq && msg.Seq < held[i+1] {
				answers = append(answers, msg.Text)
			}
		}
		if len(answers) != 1 || answers[0] != "held answer" {
			t.Fatalf("message %d, sent before the node slept, was answered %q: want once, by the late turn", seq, answers)
		}
	}
}

// nodeChild is the one of pids whose parent is the node (a turn's CLI, not
// the helpers it started).
func nodeChild(t *testing.T, pids []int, node int) int {
	t.Helper()
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil && strings.Contains(string(b), fmt.Sprintf("\nPPid:\t%d\n", node)) {
			return pid
		}
	}
	t.Fatalf("none of %v is a child of the node (%d)", pids, node)
	return 0
}

// reapable says whether process pid has exited with all its threads, so
// its parent may reap it (a zombie whose threads still exit is not yet).
func reapable(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && strings.Contains(string(b), "\nState:\tZ") && strings.Contains(string(b), "\nThreads:\t1\n")
}
