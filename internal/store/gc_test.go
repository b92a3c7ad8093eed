package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
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
	owner := store.Guard{Node: "n1", Token: c.Token}
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
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, store.Guard{}); !errs.HasReason(err, errs.ReasonConflict) {
		t.Fatalf("append whose chunks were swept: %v, want CONFLICT", err)
	}
	if msgs := readAll(t, s, c.Session.Id); len(msgs) != 0 {
		t.Fatalf("stored %d messages", len(msgs))
	}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(m.ClientId, m.ToolResult.Output)}, store.Guard{}); err != nil {
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
