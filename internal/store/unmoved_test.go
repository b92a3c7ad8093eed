package store_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// lastSeq is the session's last seq as stored.
func lastSeq(t *testing.T, s *store.Store, id string) int64 {
	t.Helper()
	sess, err := s.GetSession(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return sess.LastSeq
}

// An append under fence.Guard.Unmoved stores its messages only on the
// seq its caller checked (a merge's check of its parent): at a seq
// something was stored after, it is refused (SESSION_CHANGED, aborted)
// with nothing stored, inline or chunked; a retry of one stored is
// answered as stored; and a message of it refused refuses it whole.
func TestUnmovedAppendStoresOnlyOnTheSeqChecked(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), func(c *store.Config) { c.ChunkBytes = 4 << 10 })
	id := newSession(t, s, "n1").Session.Id
	ctx := ctxT(t)
	if _, err := s.Append(ctx, id, []*castv1.Message{userMsg("checked")}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, id, []*castv1.Message{userMsg("sent after the check")}, fence.Guard{Open: true}); err != nil {
		t.Fatal(err)
	}
	at := func(seq int64) fence.Guard { return fence.Guard{Open: true, Unmoved: true, LastSeq: seq} }
	for _, text := range []string{"inline", strings.Repeat("chunked ", 1<<10)} {
		_, err := s.Append(ctx, id, []*castv1.Message{userMsg(text), userMsg("more")}, at(1))
		if e, ok := errs.As(err); !ok || e.Reason != errs.ReasonSessionChanged || e.Kind != errs.KindAborted {
			t.Fatalf("%.8s append at #1 with #2 stored: %v, want SESSION_CHANGED (aborted)", text, err)
		}
		if last := lastSeq(t, s, id); last != 2 {
			t.Fatalf("%.8s append refused, yet the session's last seq is #%d, want #2", text, last)
		}
	}
	msgs := []*castv1.Message{userMsg(strings.Repeat("chunked ", 1<<10)), userMsg("merged")}
	out, err := s.Append(ctx, id, msgs, at(2))
	if err != nil || out[0].Seq != 3 || out[1].Seq != 4 {
		t.Fatalf("append at #2: %v, %v; want #3 and #4", out, err)
	}
	again, err := s.Append(ctx, id, msgs, at(2))
	if err != nil || again[0].Seq != 3 || again[1].Seq != 4 {
		t.Fatalf("its retry at #2, now #4: %v, %v; want it answered as stored (#3, #4)", again, err)
	}
	reused := &castv1.Message{ClientId: msgs[1].ClientId, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "another body"}
	if _, err := s.Append(ctx, id, []*castv1.Message{userMsg("first"), reused}, at(4)); !errs.HasReason(err, errs.ReasonClientIDReused) {
		t.Fatalf("append at #4 reusing a client id: %v, want CLIENT_ID_REUSED", err)
	}
	if last := lastSeq(t, s, id); last != 4 {
		t.Fatalf("append with a message refused stored its first: last seq #%d, want #4", last)
	}
}

// Unmoved appends are committed whole and alone: two made at the same
// seq and queued together store one (the other is refused, not stored
// past the seq it checked), and one whose messages do not all fit what is
// left of a round's txn waits for the next round rather than being
// stored in part across two (its last messages refused).
func TestUnmovedAppendsAreBatchedWholeAndAlone(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), func(c *store.Config) {
		c.CommitRounds, c.MaxBatchMsgs, c.MaxTxnOps = 1, 3, 12
	})
	sids, _ := createSessions(t, s, "n1", 3)
	held, other, id := sids[0], sids[1], sids[2]
	var txns atomic.Int32
	release := make(chan struct{})
	store.SetBeforeTxn(s, func() {
		if txns.Add(1) == 1 {
			<-release // hold the first round while the others queue
		}
	})
	results := make(chan error, 4)
	send := func(id string, g fence.Guard, msgs ...*castv1.Message) {
		go func() {
			_, err := s.Append(ctxT(t), id, msgs, g)
			results <- err
		}()
	}
	g := fence.Guard{Open: true, Unmoved: true, LastSeq: 0}
	send(held, fence.Guard{}, userMsg("held"))
	testharness.WaitFor(t, 10*time.Second, "the first round to reach its txn", func() bool { return txns.Load() == 1 })
	// The next round: three messages of another session, then the unmoved
	// appends; the first fits that txn only in part.
	send(other, fence.Guard{}, userMsg("o1"), userMsg("o2"), userMsg("o3"))
	testharness.WaitFor(t, 10*time.Second, "the other session's append queued", func() bool { return store.QueuedAppends(s) == 3 })
	send(id, g, userMsg("a1"), userMsg("a2"), userMsg("a3"))
	testharness.WaitFor(t, 10*time.Second, "the first unmoved append queued", func() bool { return store.QueuedAppends(s) == 6 })
	send(id, g, userMsg("b1"))
	testharness.WaitFor(t, 10*time.Second, "the second unmoved append queued", func() bool { return store.QueuedAppends(s) == 7 })
	close(release)
	var refused int
	for range 4 {
		err := <-results
		switch {
		case errs.HasReason(err, errs.ReasonSessionChanged):
			refused++
		case err != nil:
			t.Error(err)
		}
	}
	msgs, _, err := s.ListMessages(ctxT(t), id, 1, 0, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Text)
	}
	if strings.Join(got, " ") != "a1 a2 a3" || refused != 1 {
		t.Fatalf("the session holds %q with %d unmoved appends refused; want the first one whole, the second refused", got, refused)
	}
}
