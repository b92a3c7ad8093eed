package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// An append larger than one batch is committed in several rounds. When the
// round of its first batch fails (here: another writer moves the session's
// keys until the batch is out of tries; an etcd error that did not commit
// does the same), the append fails, and retrying it with the same client
// ids must store its messages in the order they were sent: no later batch
// of the failed append may have been committed ahead of the earlier one.
func TestFailedAppendDoesNotCommitItsLaterBatches(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, func(c *store.Config) { c.MaxBatchMsgs = 2 })
	raw := etcdClient(t, ep)
	sid := newSession(t, s, "n1").Session.Id
	const tries = 20 // maxAppendTries: the first batch is refused after these
	var writes atomic.Int32
	store.SetBeforeTxn(s, func() {
		if writes.Add(1) > tries {
			return
		}
		// Another replica's write: same value, new revision.
		if _, err := raw.Put(context.Background(), store.DefaultPrefix+"seqs/"+sid, "0"); err != nil {
			t.Error(err)
		}
	})
	msgs := make([]*castv1.Message, 4)
	for i := range msgs {
		msgs[i] = userMsg(fmt.Sprintf("m%d", i))
	}
	clone := func() []*castv1.Message {
		out := make([]*castv1.Message, len(msgs))
		for i, m := range msgs {
			out[i] = &castv1.Message{ClientId: m.ClientId, Kind: m.Kind, Text: m.Text}
		}
		return out
	}
	if _, err := s.Append(ctxT(t), sid, clone(), fence.Guard{}); !errs.HasReason(err, errs.ReasonConflict) {
		t.Fatalf("append whose first batch kept conflicting: %v, want CONFLICT", err)
	}
	// The error says to retry with the same client ids: do.
	out, err := s.Append(ctxT(t), sid, clone(), fence.Guard{})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range out {
		if m.Seq != int64(i+1) {
			t.Errorf("message %d (%s) stored at seq %d, want %d", i, m.Text, m.Seq, i+1)
		}
	}
	for i, m := range readAll(t, s, sid) {
		if m.Text != msgs[i].Text {
			t.Errorf("seq %d holds %q, want %q (the order the append sent)", m.Seq, m.Text, msgs[i].Text)
		}
	}
}

// The same within one batch: an append of a large message and a small one
// whose large message is refused at commit (it stalled until its chunks
// were swept) must not commit the small one after it, or the retry the
// refusal asks for stores the two out of order.
func TestRefusedMessageDoesNotCommitTheRestOfItsAppend(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	sid := newSession(t, s, "n1").Session.Id
	ctx := ctxT(t)
	big := toolResult(ids.NewClientID(), bigText(600<<10))
	small := userMsg("after the tool result")
	send := func() ([]*castv1.Message, error) {
		return s.Append(ctx, sid, []*castv1.Message{toolResult(big.ClientId, big.ToolResult.Output),
			{ClientId: small.ClientId, Kind: small.Kind, Text: small.Text}}, fence.Guard{})
	}
	store.SetAfterChunks(s, func() {
		store.SetAfterChunks(s, nil)
		if n, err := s.SweepChunks(ctx, rev(t, cli)); err != nil || n == 0 {
			t.Errorf("sweep of the stalled attempt: %d keys, %v", n, err)
		}
	})
	if _, err := send(); !errs.HasReason(err, errs.ReasonConflict) {
		t.Fatalf("append whose chunks were swept: %v, want CONFLICT", err)
	}
	out, err := send() // the retry the refusal asks for
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Seq != 1 || out[1].Seq != 2 {
		t.Fatalf("the tool result stored at seq %d and the message sent after it at %d; want 1 and 2", out[0].Seq, out[1].Seq)
	}
}
