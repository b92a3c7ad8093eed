package moves_test

import (
	"testing"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
)

// A fork retried with its request id (the first answer was lost) after the
// parent moved on is the same fork: it holds the parent's messages up to
// its fork point, once, and none sent to the parent since. A message sent
// to the parent after the fork, copied past the fork's history mark,
// would be delivered to the fork's agent as a prompt of its own.
func TestRetriedForkKeepsItsForkPoint(t *testing.T) {
	r := newMergeRig(t)
	req := moves.ForkRequest{SessionID: r.parent, RequestID: fence.RequestKey("test-user", ids.NewClientID())}
	first, err := moves.Fork(r.ctx, r.s, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "for the parent only")
	again, err := moves.Fork(r.ctx, r.s, nil, req)
	switch {
	case err != nil:
		t.Errorf("retried fork: %v", err)
	case again.Id != first.Id:
		t.Fatalf("retried fork made %s, want the first fork %s", again.Id, first.Id)
	case again.LastSeq != first.LastSeq || again.ForkedAtSeq != first.ForkedAtSeq:
		t.Errorf("retried fork: last seq %d forked at %d, want %d and %d as first answered", again.LastSeq, again.ForkedAtSeq, first.LastSeq, first.ForkedAtSeq)
	}
	msgs, _, err := r.s.ListMessages(r.ctx, first.Id, 1, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Text == "for the parent only" {
			t.Errorf("the fork holds #%d %q, sent to the parent after the fork (forked at %d)", m.Seq, m.Text, first.ForkedAtSeq)
		}
	}
}
