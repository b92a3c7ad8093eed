package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// heldTurn starts a Claude session on r's node and a second turn that the
// fake model holds until the test ends: a turn in flight, its CLI waiting
// on the model. It returns the session and the held message's seq.
func heldTurn(t *testing.T, r *turnRig) (string, int64) {
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first MARK-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	r.fake.Enqueue(fakemodel.Reply{Text: "never seen", Gate: gate})
	started := r.fake.TurnsStarted()
	seq := r.send(sess.Id, "while the node dies MARK-2")
	testharness.WaitFor(t, 2*time.Minute, "the held turn at the model", func() bool { return r.fake.TurnsStarted() > started })
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_RUNNING, seq-1)
	return sess.Id, seq
}

// waitNodeDownFailure waits for id to show failed because its node went
// away, and returns how long that took from since.
func waitNodeDownFailure(t *testing.T, r *turnRig, id string, since time.Time) time.Duration {
	var sess *castv1.Session
	testharness.WaitFor(t, time.Minute, "the turn of the gone node failed", func() bool {
		var err error
		sess, err = r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && sess.State != castv1.SessionState_SESSION_STATE_RUNNING
	})
	took := time.Since(since)
	t.Logf("failed after %s: %s", took, sess.StateReason)
	if sess.State != castv1.SessionState_SESSION_STATE_FAILED ||
		!strings.Contains(sess.StateReason, "node worker stopped answering during this turn") ||
		!strings.Contains(sess.StateReason, "`cast drain worker --skip-worktree`") {
		t.Fatalf("session %v: %q", sess.State, sess.StateReason)
	}
	return took
}

// rerunOnceBack restarts r's node and checks the held message runs again
// and the session ends idle, the message and one answer stored once.
func rerunOnceBack(t *testing.T, r *turnRig, id string, seq int64) {
	r.startNode()
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	if last := fakemodel.LastUserText(turns[len(turns)-1].Items); !strings.Contains(last, "MARK-2") {
		t.Fatalf("the turn after the node came back ran on %q", last)
	}
	prompts, answers := 0, 0
	for _, m := range r.messages(id) {
		switch {
		case m.Seq < seq:
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_USER:
			prompts++
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT:
			answers++
		}
	}
	if prompts != 1 || answers != 1 {
		t.Fatalf("after the node came back: %d prompts, %d answers; want 1 and 1", prompts, answers)
	}
}

// kill -9 of a node mid-turn: within one lease the session shows failed,
// with a reason naming the node and what to do, instead of running with no
// process behind it; once the node is back the message runs again and the
// session ends idle.
func TestNodeKilledMidTurnFailsTheTurnWithinALease(t *testing.T) {
	var lease time.Duration
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) {
		testharness.ShortLease(c)
		lease = c.LeaseTTL
	}, "claude")
	id, seq := heldTurn(t, r)
	r.node.Kill()
	if took := waitNodeDownFailure(t, r, id, time.Now()); took > lease {
		t.Fatalf("the turn failed %s after its node died, more than a lease (%s)", took, lease)
	}
	rerunOnceBack(t, r, id, seq)
}

// A node that dies while the control plane is down leaves no event to see:
// the control plane that starts finds its turn shown running, and fails it
// within one lease of serving; the node back runs it again.
func TestControlPlaneStartFailsTheTurnOfAGoneNode(t *testing.T) {
	dir, addr := filepath.Join(t.TempDir(), "etcd"), freeAddr(t)
	var lease time.Duration
	cb := func(c *controlplane.Config, _ string) {
		testharness.ShortLease(c)
		c.DataDir, c.Listen, lease = dir, addr, c.LeaseTTL
	}
	r := newTurnRigWith(t, cb, "claude")
	id, seq := heldTurn(t, r)
	r.srv.Stop()
	r.node.Kill()
	r.srv = testharness.StartControlPlane(t, func(c *controlplane.Config) { cb(c, r.fake.URL) })
	// Counted from when it serves: its embedded etcd's start (over a second
	// on a loaded machine) is not the control plane's to shorten.
	serving := time.Now()
	if took := waitNodeDownFailure(t, r, id, serving); took > lease {
		t.Fatalf("the turn failed %s after the control plane started serving, more than a lease (%s)", took, lease)
	}
	rerunOnceBack(t, r, id, seq)
}
