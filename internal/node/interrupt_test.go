package node

import (
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// An interrupt that reaches the node while the session's turn waits to
// start (its worker still sends the last turn's end report, which the
// control plane does not take yet) stops that turn: the control plane
// sends it for a user message past the delivery cursor as for a running
// turn. The node refused it ("no running turn") and the turn then ran in
// full, the model answering a message the user had stopped.
func TestInterruptOfATurnAboutToStartStopsIt(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)

	_ = p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "do not answer this", ClientId: "u1"})
	if err := a.st.assign("s1", func(o *owned) {
		o.Token, o.Agent, o.Cwd = 1, "claude", t.TempDir()
		o.ReceivedSeq = 1
		// The earlier turn's end, not recorded by the control plane yet.
		o.Report = &turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, Pending: true}
	}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.reportsDown = true
	p.mu.Unlock()
	a.wake("s1")
	select {
	case <-p.reportRefused: // the worker sends the pending report; the turn waits behind it
	case <-ctx.Done():
		t.Fatal("the worker never sent its pending report")
	}
	if err := a.interrupt("s1", false); err != nil {
		t.Fatalf("interrupt of the turn about to start refused: %v", err)
	}
	p.up()

	// The pending report lands, then the stopped turn's end: idle, and
	// no start in between.
	for idle := 0; idle < 2; {
		select {
		case st := <-p.reports:
			if st == castv1.SessionState_SESSION_STATE_RUNNING {
				t.Fatal("the interrupted turn started")
			}
			if st == castv1.SessionState_SESSION_STATE_IDLE {
				idle++
			}
		case <-ctx.Done():
			o, _ := a.st.get("s1")
			t.Fatalf("the interrupted turn did not end: delivered seq %d, failed seq %d", o.DeliveredSeq, o.FailedSeq)
		}
	}
	if o, _ := a.st.get("s1"); o.DeliveredSeq != 1 {
		t.Fatalf("delivered seq %d after the interrupt, want 1 (the message is done; the next turn carries it as history)", o.DeliveredSeq)
	}
	if n := len(fm.Turns()); n != 0 {
		t.Fatalf("the model got %d requests for a turn interrupted before it started", n)
	}
}
