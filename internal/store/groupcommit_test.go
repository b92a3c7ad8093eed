package store_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// acks records what every append was acknowledged with, per session.
type acks struct {
	mu    sync.Mutex
	seqs  map[string]map[string]int64 // session -> client id -> seq
	texts map[string]string           // client id -> text
	calls atomic.Int64                // Append calls made
	errs  atomic.Int64                // Append calls that failed (and were retried)
}

func newAcks() *acks {
	return &acks{seqs: map[string]map[string]int64{}, texts: map[string]string{}}
}

// ack records that m was stored in sid as seq, and fails t when the same
// client id was acknowledged with another seq before.
func (a *acks) ack(t *testing.T, sid string, m *castv1.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seqs[sid] == nil {
		a.seqs[sid] = map[string]int64{}
	}
	if old, ok := a.seqs[sid][m.ClientId]; ok && old != m.Seq {
		t.Errorf("client id %s acknowledged as seq %d and as %d", m.ClientId, old, m.Seq)
	}
	a.seqs[sid][m.ClientId], a.texts[m.ClientId] = m.Seq, m.Text
}

// appendUntilStored appends a copy of m with guard g until an append
// succeeds, as a client retries with the same client id, and records the
// ack.
func (a *acks) appendUntilStored(t *testing.T, s *store.Store, sid string, g fence.Guard, m *castv1.Message) {
	ctx := ctxT(t)
	for {
		a.calls.Add(1)
		out, err := s.Append(ctx, sid, []*castv1.Message{proto.Clone(m).(*castv1.Message)}, g)
		if err == nil {
			a.ack(t, sid, out[0])
			return
		}
		if ctx.Err() != nil || errs.HasReason(err, errs.ReasonNotOwner) { // no guard here is stale
			t.Errorf("append %s never stored: %v", m.ClientId, err)
			return
		}
		a.errs.Add(1)
	}
}

// check reads every session back and fails t unless its seqs are dense
// from 1, each client id is stored once, and every acknowledged message
// is stored at its acknowledged seq with its text: nothing lost, nothing
// duplicated.
func (a *acks) check(t *testing.T, s *store.Store) {
	t.Helper()
	for sid, want := range a.seqs {
		var got []*castv1.Message
		if err := s.Export(ctxT(t), sid, func(_ *castv1.Session, page []*castv1.Message) error {
			got = append(got, page...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for i, m := range got {
			if m.Seq != int64(i+1) || stored[m.ClientId] {
				t.Fatalf("session %s: message %d has seq %d (client id %s, seen before: %v)", sid, i, m.Seq, m.ClientId, stored[m.ClientId])
			}
			stored[m.ClientId] = true
			if seq, ok := want[m.ClientId]; !ok || seq != m.Seq || a.texts[m.ClientId] != m.Text {
				t.Fatalf("session %s: stored %s at %d (%q); acknowledged at %d (%q)", sid, m.ClientId, m.Seq, m.Text, seq, a.texts[m.ClientId])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("session %s: %d messages stored, %d acknowledged", sid, len(got), len(want))
		}
	}
}

// createSessions registers node and creates n sessions on it; it returns
// their ids and their owner guards.
func createSessions(t *testing.T, s *store.Store, node string, n int) ([]string, []fence.Guard) {
	t.Helper()
	first := newSession(t, s, node)
	ids, guards := []string{first.Session.Id}, []fence.Guard{{Node: node, Token: first.Token}}
	for len(ids) < n {
		c, err := s.CreateSession(ctxT(t), fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: node})
		if err != nil {
			t.Fatal(err)
		}
		ids, guards = append(ids, c.Session.Id), append(guards, fence.Guard{Node: node, Token: c.Token})
	}
	return ids, guards
}

// Many appenders on many sessions, two control plane replicas (so rounds
// of one replica conflict with the other's on shared sessions), some
// sessions written by two appenders, some appenders as the owner node, and client ids retried after their
// ack and sent twice at once: seqs stay dense, nothing is lost or stored
// twice, and sessions share txns (fewer txns than appends); with one
// round in flight at a time and with two.
func TestGroupCommitAcrossSessionsIsDenseAndExactlyOnce(t *testing.T) {
	for _, rounds := range []int{1, 2} {
		t.Run(fmt.Sprintf("rounds=%d", rounds), func(t *testing.T) { groupCommitIsDenseAndExactlyOnce(t, rounds) })
	}
}

func groupCommitIsDenseAndExactlyOnce(t *testing.T, rounds int) {
	ep := testharness.StartEtcd(t, nil)
	cfg := func(c *store.Config) { c.CommitRounds, c.CommitRoundFill = rounds, 2 } // rounds overlap often
	replicas := []*store.Store{testharness.OpenStore(t, ep, cfg), testharness.OpenStore(t, ep, cfg)}
	// Twelve appends a writer reach each case below twice (i = 0, 7 sent
	// twice at once; 5, 10 retried after the ack) with 40 writers at once
	// on both replicas: some 640 appends a run, about a hundred conflicts.
	const sessions, writers, each = 24, 40, 12
	sids, guards := createSessions(t, replicas[0], "n1", sessions)
	a := newAcks()
	var wg sync.WaitGroup
	for w := range writers {
		// Writers w and w+24 share a session, one on each replica; every
		// third writes as the session's owner (a node's appends).
		s, sid := replicas[(w/sessions)%2], sids[w%sessions]
		g := fence.Guard{}
		if w%3 == 0 {
			g = guards[w%sessions]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m := userMsg(fmt.Sprintf("w%d-%d", w, i))
				switch {
				case i%7 == 0: // sent twice at once
					var twice sync.WaitGroup
					for range 2 {
						twice.Add(1)
						go func() { defer twice.Done(); a.appendUntilStored(t, s, sid, g, m) }()
					}
					twice.Wait()
				case i%5 == 0: // retried after its ack
					a.appendUntilStored(t, s, sid, g, m)
					a.appendUntilStored(t, s, sid, g, m)
				default:
					a.appendUntilStored(t, s, sid, g, m)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	a.check(t, replicas[0])
	txns := store.AppendTxns(replicas[0]) + store.AppendTxns(replicas[1])
	t.Logf("%d appends in %d txns (reads and writes); %d charged conflicts", a.calls.Load(), txns,
		int(store.AppendConflicts(replicas[0])+store.AppendConflicts(replicas[1])))
	if txns >= a.calls.Load() {
		t.Fatalf("%d appends took %d txns: concurrent appends to different sessions did not share txns", a.calls.Load(), txns)
	}
}

// When a round's txn fails because one session's keys moved (another
// replica wrote it), the other sessions of the round commit at once in a
// txn of their own; only the moved session is tried again, and refused
// once it has conflicted maxAppendTries times.
func TestGroupCommitConflictRetriesOnlyTheMovedSession(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	raw := etcdClient(t, ep)
	sids, _ := createSessions(t, s, "n1", 4)
	first, moving := sids[0], sids[1]
	var txns atomic.Int32
	release := make(chan struct{})
	store.SetBeforeTxn(s, func() {
		if txns.Add(1) == 1 {
			<-release // hold the first round while the others queue
			return
		}
		// Move the session's seq key (same value, new revision), as a
		// write of another replica does.
		if _, err := raw.Put(context.Background(), store.DefaultPrefix+"seqs/"+moving, "0"); err != nil {
			t.Error(err)
		}
	})
	results := make([]chan error, len(sids))
	send := func(i int) {
		results[i] = make(chan error, 1)
		go func() {
			_, err := s.Append(ctxT(t), sids[i], []*castv1.Message{userMsg("hi")}, fence.Guard{})
			results[i] <- err
		}()
	}
	send(0)
	testharness.WaitFor(t, 10*time.Second, "the first round to reach its txn", func() bool { return txns.Load() == 1 })
	for i := 1; i < len(sids); i++ {
		send(i)
	}
	testharness.WaitFor(t, 10*time.Second, "three appends queued", func() bool { return store.QueuedAppends(s) == 3 })
	close(release)
	for i, sid := range sids {
		err := <-results[i]
		if sid == moving {
			if !errs.HasReason(err, errs.ReasonConflict) {
				t.Errorf("the moved session's append: %v, want CONFLICT", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("append to %s: %v", sid, err)
		}
	}
	// A read and a write for the first round; then the round of three
	// (a read, its write), the two that did not move alone, and the moved
	// one alone until out of tries; each failed write is followed by a
	// read of its keys.
	const tries = 20
	if got, want := store.AppendTxns(s), int64(2+1+1+1+(tries-1)+tries); got != want || store.AppendConflicts(s) != tries {
		t.Fatalf("%d txns and %v conflicts; want %d and %d", got, store.AppendConflicts(s), want, tries)
	}
	store.SetBeforeTxn(s, nil)
	for _, sid := range []string{first, moving} {
		out, err := s.Append(ctxT(t), sid, []*castv1.Message{userMsg("after")}, fence.Guard{})
		if err != nil || out[0].Seq != map[string]int64{first: 2, moving: 1}[sid] {
			t.Fatalf("append after the conflicts to %s: %v, %v", sid, out, err)
		}
	}
}

// A round's txn that etcd commits but whose answer never arrives (the
// connection drops after the write reached etcd) fails every append of the
// round with an error, never a false ack; each retried with the same
// client id gets the seq that txn committed, and nothing acknowledged is
// lost or stored twice.
func TestGroupCommitTxnErrorIsTruthful(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	u, err := url.Parse(ep)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testharness.StartProxy(t, u.Host)
	s := testharness.OpenStore(t, "http://"+proxy.Addr, nil)
	raw := etcdClient(t, ep)
	sids, _ := createSessions(t, s, "n1", 8)
	var txns atomic.Int32
	cut := make(chan struct{})
	store.SetBeforeTxn(s, func() {
		if txns.Add(1) != 20 { // a round under full load
			return
		}
		// Drop the answers, and once etcd has applied the txn, the
		// connections: the round's txn committed but errs for its callers.
		rev, err := raw.Get(context.Background(), "probe")
		if err != nil {
			t.Error(err)
			return
		}
		w := raw.Watch(context.Background(), store.DefaultPrefix+"seqs/", clientv3.WithPrefix(), clientv3.WithRev(rev.Header.Revision+1))
		proxy.Blackhole(testharness.FromTarget)
		go func() {
			defer close(cut)
			<-w
			proxy.Reset()
			proxy.Heal()
		}()
	})
	a := newAcks()
	var wg sync.WaitGroup
	for w := range 2 * len(sids) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				a.appendUntilStored(t, s, sids[w%len(sids)], fence.Guard{}, &castv1.Message{ClientId: ids.NewClientID(),
					Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: fmt.Sprintf("w%d-%d", w, i)})
			}
		}()
	}
	wg.Wait()
	<-cut
	if a.errs.Load() == 0 {
		t.Fatal("no append saw the cut connection: the fault was not injected")
	}
	t.Logf("%d appends, %d failed and were retried", a.calls.Load(), a.errs.Load())
	a.check(t, s)
}

// While a round is in flight (held at its txn here), appends to other
// sessions wait for it until CommitRoundFill of them are queued; then a
// second round commits them beside it, and every append is answered.
func TestGroupCommitBacklogStartsASecondRound(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, func(c *store.Config) { c.CommitRounds, c.CommitRoundFill = 2, 3 })
	sids, _ := createSessions(t, s, "n1", 4)
	var txns atomic.Int32
	release := make(chan struct{})
	store.SetBeforeTxn(s, func() {
		if txns.Add(1) == 1 {
			<-release // hold the first round while the others queue
		}
	})
	results := make(chan error, len(sids))
	send := func(i int) {
		go func() {
			_, err := s.Append(ctxT(t), sids[i], []*castv1.Message{userMsg("hi")}, fence.Guard{})
			results <- err
		}()
	}
	send(0)
	testharness.WaitFor(t, 10*time.Second, "the first round to reach its txn", func() bool { return txns.Load() == 1 })
	send(1)
	send(2)
	testharness.WaitFor(t, 10*time.Second, "two appends queued", func() bool { return store.QueuedAppends(s) == 2 })
	if n := store.CommitLeaders(s); n != 1 {
		t.Fatalf("%d rounds led with two appends queued under a fill of 3; want 1 (the held one)", n)
	}
	send(3)
	testharness.WaitFor(t, 10*time.Second, "a second round's txn beside the held one", func() bool { return txns.Load() == 2 })
	close(release)
	for range sids {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	// Each round a read (its sessions are new to the replica) and a write:
	// the held one, and one for the other three together.
	if got := store.AppendTxns(s); got != 4 || txns.Load() != 2 {
		t.Errorf("%d txns, %d of them writes; want 4 and 2", got, txns.Load())
	}
}
