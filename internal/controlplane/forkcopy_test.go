package controlplane_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// stopAfterCreate is a control plane that stops (its appends fail) once
// the fork's session is created, before any of its history is copied.
type stopAfterCreate struct {
	*store.Store
	fork *string
}

func (s stopAfterCreate) CreateSession(ctx context.Context, p fence.CreateParams) (fence.Created, error) {
	c, err := s.Store.CreateSession(ctx, p)
	*s.fork = c.Session.GetId()
	return c, err
}

func (s stopAfterCreate) Append(context.Context, string, []*castv1.Message, fence.Guard) ([]*castv1.Message, error) {
	return nil, errors.New("the control plane stopped")
}

// A fork whose copy of its parent's history stopped part way (its control
// plane stopped; the error names the fork) takes no message until the
// same fork, retried, finished it: a message stored then would get a seq
// within the fork's history mark (history_seq), which the node counts as
// history and never delivers, and the retried copy would put the parent's
// last message past the mark, as a prompt of the fork's own. Once the
// retry finished the copy, a message lands past the mark.
func TestHalfCopiedForkTakesNoMessage(t *testing.T) {
	t.Parallel()
	srv, st, _ := silentNode(t)
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	p, err := st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "mute"})
	if err != nil {
		t.Fatal(err)
	}
	for i, kind := range []castv1.MessageKind{castv1.MessageKind_MESSAGE_KIND_USER, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, castv1.MessageKind_MESSAGE_KIND_USER} {
		if _, err := st.Append(ctx, p.Session.Id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: kind, Text: "parent " + string(rune('a'+i))}}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	req := moves.ForkRequest{SessionID: p.Session.Id, RequestID: fence.RequestKey("test-user", ids.NewClientID())}
	var fork string
	if _, err := moves.Fork(ctx, stopAfterCreate{Store: st, fork: &fork}, nil, req); err == nil || fork == "" {
		t.Fatalf("the fork that stopped copying: %v (fork %q)", err, fork)
	}
	send := func() (*castv1.SendMessageResponse, error) {
		return c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: fork, Text: "go on", RequestId: ids.NewClientID()})
	}
	f, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: fork})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := send(); err == nil {
		t.Fatalf("a message to the fork holding %d of its %d history messages was stored at #%d, within its history", f.LastSeq, f.HistorySeq, resp.Message.Seq)
	} else if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != errs.ReasonForkIncomplete {
		t.Fatalf("a message to the half-copied fork: %v (reason %q), want FAILED_PRECONDITION %s", err, client.ReasonOf(err), errs.ReasonForkIncomplete)
	}
	// An API append of a user message is handed to the node like a sent
	// one, so the store refuses it the same way, in the append's txn.
	user := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "appended"}
	if resp, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: fork, Messages: []*castv1.Message{user}}); err == nil {
		t.Fatalf("a user message appended to the fork holding %d of its %d history messages was stored at #%d, within its history", f.LastSeq, f.HistorySeq, resp.Messages[0].Seq)
	} else if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != errs.ReasonForkIncomplete {
		t.Fatalf("a user message appended to the half-copied fork: %v (reason %q), want FAILED_PRECONDITION %s", err, client.ReasonOf(err), errs.ReasonForkIncomplete)
	}
	done, err := moves.Fork(ctx, st, nil, req)
	if err != nil || done.Id != fork {
		t.Fatalf("the retried fork: %v (%v), want %s finished", done, err, fork)
	}
	resp, err := send()
	if err != nil {
		t.Fatalf("a message to the finished fork: %v", err)
	}
	if resp.Message.Seq <= done.HistorySeq {
		t.Fatalf("the message to the finished fork is #%d, within its history (through #%d)", resp.Message.Seq, done.HistorySeq)
	}
}
