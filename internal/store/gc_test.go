package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func rev(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ctxT(t), "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// leaveChunks writes what a control plane killed between an attempt's
// chunks and its envelope leaves behind.
func leaveChunks(t *testing.T, cli *clientv3.Client, sid string) {
	t.Helper()
	prefix := fmt.Sprintf("%schunks/%s/%s/%s/", store.DefaultPrefix, sid, ids.NewClientID(), ids.NewClientID())
	for i := range 3 {
		if _, err := cli.Put(ctxT(t), fmt.Sprintf("%s%06d", prefix, i), "partial chunk"); err != nil {
			t.Fatal(err)
		}
	}
}

// The sweep deletes the chunks of every attempt that did not commit (owner
// changed, a retry whose first try won, a crash, a deleted session) and
// none that a committed envelope points at or that are newer than asked.
func TestSweepCollectsOnlyOrphans(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	owner := fence.Guard{Node: "n1", Token: c.Token}
	kept, cid := bigText(1<<20), ids.NewClientID()
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(cid, kept)}, owner); err != nil {
		t.Fatal(err)
	}
	committed := chunkKeys(t, cli)

	// A retry racing its own first try: the first try commits while the
	// retry's chunks are written; the retry gets the committed message.
	raced := toolResult(ids.NewClientID(), bigText(600<<10))
	store.SetAfterChunks(s, func() {
		store.SetAfterChunks(s, nil)
		if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(raced.ClientId, raced.ToolResult.Output)}, owner); err != nil {
			t.Error(err)
		}
	})
	if out, err := s.Append(ctx, c.Session.Id, []*castv1.Message{raced}, owner); err != nil || out[0].Seq != 2 {
		t.Fatalf("retry racing its first try: %v", err)
	}
	committed = chunkKeys(t, cli) - 3 // the retry's 3 chunks are orphans

	// The owner changes while an append's chunks are written.
	store.SetAfterChunks(s, func() {
		store.SetAfterChunks(s, nil)
		handover(t, s, c.Session.Id, "n1", c.Token, "n2")
	})
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(ids.NewClientID(), bigText(700<<10))}, owner); !errs.HasReason(err, errs.ReasonNotOwner) {
		t.Fatalf("append across a handover: %v", err)
	}
	leaveChunks(t, cli, c.Session.Id)  // a crash
	leaveChunks(t, cli, "deletedsess") // a session that is gone
	cutoff := rev(t, cli)
	leaveChunks(t, cli, c.Session.Id) // newer than the cutoff: maybe in flight

	n, err := s.SweepChunks(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if left := chunkKeys(t, cli); left != committed+3 || n != 3+3+3+3 {
		t.Fatalf("sweep deleted %d keys, left %d; want 12 deleted, %d left", n, left, committed+3)
	}
	if n, err := s.SweepChunks(ctx, rev(t, cli)); err != nil || n != 3 || chunkKeys(t, cli) != committed {
		t.Fatalf("second sweep deleted %d (%v), left %d, want %d", n, err, chunkKeys(t, cli), committed)
	}
	msgs := readAll(t, s, c.Session.Id)
	if len(msgs) != 3 || msgs[0].ToolResult.GetOutput() != kept || msgs[1].ToolResult.GetOutput() != raced.ToolResult.Output {
		t.Fatalf("transcript after sweeps: %d messages", len(msgs))
	}
}

// An append whose chunks are swept before its envelope commits (it stalled
// past the grace) is refused, and nothing unreadable is stored; its retry
// makes a new attempt and commits.
func TestAppendAfterItsChunksWereSweptIsRefused(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	m := toolResult(ids.NewClientID(), bigText(900<<10))
	store.SetAfterChunks(s, func() {
		store.SetAfterChunks(s, nil)
		if n, err := s.SweepChunks(ctx, rev(t, cli)); err != nil || n != 4 {
			t.Errorf("sweep of the stalled attempt: %d keys, %v", n, err)
		}
	})
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, fence.Guard{}); !errs.HasReason(err, errs.ReasonConflict) {
		t.Fatalf("append whose chunks were swept: %v, want CONFLICT", err)
	}
	if msgs := readAll(t, s, c.Session.Id); len(msgs) != 0 {
		t.Fatalf("stored %d messages", len(msgs))
	}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(m.ClientId, m.ToolResult.Output)}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if msgs := readAll(t, s, c.Session.Id); len(msgs) != 1 || msgs[0].ToolResult.GetOutput() != m.ToolResult.Output {
		t.Fatalf("retry stored %d messages", len(msgs))
	}
}

// Run sweeps by itself: orphans older than the grace disappear.
func TestRunSweepsOrphans(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, func(c *store.Config) { c.SweepEvery, c.SweepGrace = 50*time.Millisecond, time.Second })
	cli := etcdClient(t, ep)
	c := newSession(t, s, "n1")
	leaveChunks(t, cli, c.Session.Id)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testharness.WaitFor(t, 20*time.Second, "the sweeper to delete orphan chunks", func() bool { return chunkKeys(t, cli) == 0 })
}

// Two replicas append the same large messages at once (a client retrying
// through another replica) while a sweep with no grace at all runs in a
// loop, and other appends stall across a whole sweep: whatever is
// acknowledged is stored once and reads back byte-exact. The sweep may
// refuse an append in flight (CONFLICT, retried), never damage a committed
// one.
func TestReplicasRetryingUnderAggressiveSweep(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	a, b := testharness.OpenStore(t, ep, nil), testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	c := newSession(t, a, "n1")
	ctx := ctxT(t)
	stop := make(chan struct{})
	swept := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				swept <- nil
				return
			default:
			}
			if _, err := b.SweepChunks(ctx, rev(t, cli)); err != nil {
				swept <- err
				return
			}
		}
	}()
	const n = 8
	var refused atomic.Int64
	var stall atomic.Bool
	// An append through a with stall set waits out a whole sweep between
	// its chunks and its commit, as if it outlived the grace.
	store.SetAfterChunks(a, func() {
		if stall.CompareAndSwap(true, false) {
			if _, err := b.SweepChunks(ctx, rev(t, cli)); err != nil {
				t.Error(err)
			}
		}
	})
	want := map[string]string{}
	for i := range n {
		m := toolResult(ids.NewClientID(), bigText(300<<10+i))
		want[m.ClientId] = m.ToolResult.Output
		replicas := []*store.Store{a, b}
		if i%2 == 1 { // one replica, stalled once
			replicas = replicas[:1]
			stall.Store(true)
		}
		errc := make(chan error, 2)
		for _, s := range replicas {
			go func() {
				var err error
				for try := 0; try < 20; try++ { // a refused attempt is retried with the same id
					if _, err = s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(m.ClientId, m.ToolResult.Output)}, fence.Guard{}); !errs.HasReason(err, errs.ReasonConflict) {
						break
					}
					refused.Add(1)
				}
				errc <- err
			}()
		}
		for range replicas {
			if err := <-errc; err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
	}
	close(stop)
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if refused.Load() < n/2 {
		t.Fatalf("%d appends refused for their swept chunks, want at least %d", refused.Load(), n/2)
	}
	msgs := readAll(t, a, c.Session.Id)
	if len(msgs) != n {
		t.Fatalf("stored %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) || want[m.ClientId] != m.ToolResult.GetOutput() {
			t.Fatalf("message %d (seq %d) does not read back as sent", i, m.Seq)
		}
		delete(want, m.ClientId)
	}
	if _, err := b.SweepChunks(ctx, rev(t, cli)); err != nil {
		t.Fatal(err)
	}
	if got := chunkKeys(t, cli); got != int64(2*n) { // 2 chunks per committed message, no orphans
		t.Fatalf("%d chunk keys left, want %d", got, 2*n)
	}
}
