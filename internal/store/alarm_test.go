package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A store driven into etcd's NOSPACE alarm (by writes behind its back, so
// its own guard cannot refuse them) recovers by itself: it compacts,
// defragments, disarms, counts the recovery, and takes writes again.
func TestNoSpaceAlarmRecoversByItself(t *testing.T) {
	const quota = 24 << 20
	ep := testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.QuotaBytes = quota })
	cli := etcdClient(t, ep)
	ctx := ctxT(t)
	s, m := openWithMetrics(t, ep, quota)
	c := newSession(t, s, "n1")

	fillUntilNoSpace(t, cli, func(int) string { return "/filler" }) // history that compaction drops
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg("refused")}, fence.Guard{}); err == nil {
		t.Fatal("append accepted under NOSPACE")
	}

	run(t, s)
	testharness.WaitFor(t, 30*time.Second, "the NOSPACE alarm to be disarmed", func() bool {
		return metrics.Value(m.NoSpaceRecoveries.WithLabelValues("recovered")) == 1
	})
	if alarms, err := cli.AlarmList(ctx); err != nil || len(alarms.Alarms) != 0 || metrics.Value(m.NoSpaceAlarm) != 0 {
		t.Fatalf("after recovery: alarms %v %v, gauge %v", alarms, err, metrics.Value(m.NoSpaceAlarm))
	}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg("accepted again")}, fence.Guard{}); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatalf("register after recovery: %v", err)
	}
	if msgs := readAll(t, s, c.Session.Id); len(msgs) != 1 || msgs[0].Text != "accepted again" {
		t.Fatalf("transcript after recovery: %v", msgs)
	}
}

// fillUntilNoSpace writes 1 MiB values to key(i) behind the store's back
// until etcd raises NOSPACE.
func fillUntilNoSpace(t *testing.T, cli *clientv3.Client, key func(int) string) {
	t.Helper()
	ctx := ctxT(t)
	filler := strings.Repeat("f", 1<<20)
	full := false
	for i := 0; i < 64 && !full; i++ {
		_, err := cli.Put(ctx, key(i), filler)
		full = err != nil && strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error())
		if err != nil && !full {
			t.Fatal(err)
		}
	}
	alarms, err := cli.AlarmList(ctx)
	if !full || err != nil || len(alarms.Alarms) != 1 {
		t.Fatalf("etcd not in NOSPACE: full=%v alarms=%v %v", full, alarms, err)
	}
}

// openWithMetrics opens a store polling fast, with metrics to read.
func openWithMetrics(t *testing.T, ep string, quota int64) (*store.Store, *metrics.Store) {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.QuotaBytes, cfg.QuotaPoll = quota, 50*time.Millisecond
	m := metrics.NewStore(prometheus.NewRegistry())
	s, err := store.Open(ctxT(t), []string{ep}, store.Access{}, cfg, m, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, m
}

// run runs s.Run until the test ends.
func run(t *testing.T, s *store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Live data over the quota cannot be compacted away: the recovery says so
// (metric, gauge) and leaves the alarm up rather than disarm into a loop.
// (Some 18-23 MiB of live keys, depending on fragmentation, fit under
// etcd's 24 MiB only; the store is told 8 MiB, as when live data outgrew
// the quota.)
func TestNoSpaceOfLiveDataStaysAlarmed(t *testing.T) {
	ep := testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.QuotaBytes = 24 << 20 })
	cli := etcdClient(t, ep)
	s, m := openWithMetrics(t, ep, 8<<20)
	fillUntilNoSpace(t, cli, func(i int) string { return fmt.Sprint("/live/", i) })
	run(t, s)
	testharness.WaitFor(t, 30*time.Second, "a failed NOSPACE recovery", func() bool {
		return metrics.Value(m.NoSpaceRecoveries.WithLabelValues("failed")) >= 1
	})
	alarms, err := cli.AlarmList(ctxT(t))
	if err != nil || len(alarms.Alarms) != 1 || metrics.Value(m.NoSpaceAlarm) != 1 || metrics.Value(m.NoSpaceRecoveries.WithLabelValues("recovered")) != 0 {
		t.Fatalf("alarms %v (%v), gauge %v", alarms, err, metrics.Value(m.NoSpaceAlarm))
	}
}

// A watch whose replay is cut by a compaction (the NOSPACE recovery
// compacts to the current revision) ends UNAVAILABLE, and watching again
// from the next seq delivers the rest exactly once.
func TestWatchReplayCutByCompactionResumes(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	const n = store.ExportPageSize + 20
	batch := make([]*castv1.Message, n)
	for i := range batch {
		batch[i] = userMsg(fmt.Sprint("m", i+1))
	}
	if _, err := s.Append(ctx, c.Session.Id, batch, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	collect := func(compactAt int64) func(store.Event) error {
		return func(ev store.Event) error {
			if ev.Message == nil {
				return nil
			}
			seqs = append(seqs, ev.Message.Seq)
			if ev.Message.Seq == compactAt { // a write, then compaction past the replay's revision
				if _, err := cli.Put(ctx, "/other", "x"); err != nil {
					t.Error(err)
				}
				if _, err := cli.Compact(ctx, rev(t, cli)); err != nil {
					t.Error(err)
				}
			}
			if ev.Message.Seq == n {
				return context.Canceled // caught up
			}
			return nil
		}
	}
	err := s.Watch(ctx, c.Session.Id, 1, collect(1))
	if !errs.HasReason(err, errs.ReasonUnavailable) || len(seqs) != store.ExportPageSize {
		t.Fatalf("replay cut by compaction: %v after %d messages, want UNAVAILABLE after %d", err, len(seqs), store.ExportPageSize)
	}
	if err := s.Watch(ctx, c.Session.Id, seqs[len(seqs)-1]+1, collect(0)); err != context.Canceled {
		t.Fatalf("watch again: %v", err)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("seq %d at %d: delivered %d messages", seq, i, len(seqs))
		}
	}
	if len(seqs) != n {
		t.Fatalf("delivered %d of %d", len(seqs), n)
	}
}

// A watcher decoding a chunked message from an event at a revision since
// compacted still reads it: attempt chunks never change, so the latest
// revision holds the same bytes (the digest proves it).
func TestChunkReadSurvivesCompaction(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	out := bigText(700 << 10)
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(ids.NewClientID(), out)}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	env, err := cli.Get(ctx, store.DefaultPrefix+"msgs/"+c.Session.Id+"/", clientv3.WithPrefix())
	if err != nil || len(env.Kvs) != 1 {
		t.Fatalf("envelope: %v %v", env, err)
	}
	if _, err := cli.Put(ctx, "/other", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, rev(t, cli)); err != nil {
		t.Fatal(err)
	}
	m, err := store.DecodeMessage(ctx, s, c.Session.Id, env.Kvs[0].Value, env.Kvs[0].ModRevision)
	if err != nil || m.ToolResult.GetOutput() != out {
		t.Fatalf("decode at a compacted revision: %v", err)
	}
}

// Deleted data does not shrink etcd's file, which is what the quota guard
// counts: a store whose file nears the limit compacts and defragments by
// itself, so space freed by deletes counts again and appends are accepted.
func TestFileNearQuotaIsReclaimed(t *testing.T) {
	ep := testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.QuotaBytes = 64 << 20 })
	cli := etcdClient(t, ep)
	const quota = 20 << 20
	s, m := openWithMetrics(t, ep, quota)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	filler := strings.Repeat("f", 1<<20)
	for i := 0; i < 40; i++ { // history of one key: garbage once compacted
		if _, err := cli.Put(ctx, "/filler", filler); err != nil {
			t.Fatal(err)
		}
		if st, err := cli.Status(ctx, ep); err != nil || st.DbSize > quota {
			break
		}
	}
	testharness.WaitFor(t, 10*time.Second, "etcd's file past the store's quota", func() bool {
		st, err := cli.Status(ctx, ep)
		return err == nil && st.DbSize > quota
	})
	run(t, s)
	testharness.WaitFor(t, 30*time.Second, "a reclaim that freed space", func() bool {
		return metrics.Value(m.Reclaims.WithLabelValues("freed")) >= 1
	})
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg("fits again")}, fence.Guard{}); err != nil {
		t.Fatalf("append after the reclaim: %v", err)
	}
}
