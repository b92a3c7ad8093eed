package store_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A turn abandoned on a source that went away ends at the handover's
// commit, and so does its fleet reservation: left to its lease it would
// count against the account for half an hour and could move the fleet
// ahead for a turn that no longer runs. Another session's reservation on
// the same account stays.
func TestHandoverOfAnAbandonedTurnFreesItsReservation(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	moved, other := newSession(t, s, "n1"), newSession(t, s, "n1")
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []fence.Created{moved, other} {
		if _, err := s.SetState(ctx, c.Session.Id, fence.Guard{Node: "n1", Token: c.Token}, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING}); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(ctx, "claude", "work", c.Session.Id); err != nil {
			t.Fatal(err)
		}
	}
	handover(t, s, moved.Session.Id, "n1", moved.Token, "n2")
	sess, err := s.GetSession(ctx, moved.Session.Id)
	if err != nil {
		t.Fatal(err)
	}
	if sess.State != castv1.SessionState_SESSION_STATE_IDLE {
		t.Errorf("moved session state = %v, want IDLE", sess.State)
	}
	res, err := s.Reservations(ctx, "claude")
	if err != nil {
		t.Fatal(err)
	}
	if res["work"] != 1 {
		t.Errorf("reservations on account work = %d after the handover, want 1 (the other session's only)", res["work"])
	}
}

// A failed session's held messages (its source's turn kept them for the
// next message) run on the destination, which never heard of the
// failure: the handover clears the held seq, so a switch or an interrupt
// on the destination stops the turn they start (moves.RunsNothing).
func TestHandoverClearsTheHeldSeq(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	c := newSession(t, s, "n1")
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{{ClientId: "u1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "held"}}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	failed, err := s.SetState(ctx, c.Session.Id, fence.Guard{Node: "n1", Token: c.Token},
		fence.TurnState{State: castv1.SessionState_SESSION_STATE_FAILED, Reason: "not logged in", HeldSeq: 1})
	if err != nil || failed.HeldSeq != 1 {
		t.Fatalf("failed report: held seq %v, %v", failed.GetHeldSeq(), err)
	}
	handover(t, s, c.Session.Id, "n1", c.Token, "n2")
	sess, err := s.GetSession(ctx, c.Session.Id)
	if err != nil {
		t.Fatal(err)
	}
	if sess.HeldSeq != 0 {
		t.Fatalf("held seq %d after the handover, want 0 (the destination runs the message)", sess.HeldSeq)
	}
}
