package moves_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
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

// raceStore appends a message to the parent once the fork's session is
// created: a message sent while the fork is being made.
type raceStore struct {
	*store.Store
	parent string
}

func (s raceStore) CreateSession(ctx context.Context, p fence.CreateParams) (fence.Created, error) {
	c, err := s.Store.CreateSession(ctx, p)
	if err == nil {
		_, err = s.Store.Append(ctx, s.parent, []*castv1.Message{{ClientId: ids.NewClientID(),
			Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "sent while forking"}}, fence.Guard{})
	}
	return c, err
}

// A fork of a session with no messages yet copies nothing, even when the
// first message reaches the parent while the fork is made: the fork
// point is 0, and a message past it in the fork would run there as the
// fork's own prompt.
func TestForkOfEmptySessionCopiesNothing(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1", Agents: []*castv1.AgentInstall{{Name: "claude"}}}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := moves.Fork(ctx, raceStore{Store: s, parent: p.Session.Id}, nil, moves.ForkRequest{SessionID: p.Session.Id})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := s.ListMessages(ctx, f.Id, 1, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
			t.Errorf("the fork (forked at %d) holds #%d %q, sent to the parent after the fork point", f.ForkedAtSeq, m.Seq, m.Text)
		}
	}
}
