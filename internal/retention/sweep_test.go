package retention_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/retention"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// world is a store on embedded etcd whose history moves to a real folder.
type world struct {
	s    *store.Store
	objs *objstore.Folder
	cli  *clientv3.Client
}

func newWorld(t *testing.T) world {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	objs, err := objstore.NewFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tc := store.DefaultTierConfig()
	tc.HotMessages, tc.MinSegment, tc.SegmentMessages = 0, 1, 10
	if err := s.UseObjects(objs, tc, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterNode(ctxT(t), &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return world{s: s, objs: objs, cli: cli}
}

// session creates a session of creator with n messages; tiered moves them
// all to segments.
func (w world) session(t *testing.T, creator string, n int, tiered bool) string {
	t.Helper()
	c, err := w.s.CreateSession(ctxT(t), fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1", Creator: creator})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*castv1.Message
	for i := range n {
		batch = append(batch, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: fmt.Sprintf("%s %d", creator, i)})
	}
	if _, err := w.s.Append(ctxT(t), c.Session.Id, batch, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if tiered {
		if moved, err := w.s.TierSession(ctxT(t), c.Session.Id, int64(n), time.Now()); err != nil || moved != n {
			t.Fatalf("tiered %d of %d messages: %v", moved, n, err)
		}
	}
	return c.Session.Id
}

func (w world) objects(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := w.objs.List(ctxT(t), "", func(key string, _ time.Time) error { out[key] = true; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keysOf counts the etcd keys that name session id.
func (w world) keysOf(t *testing.T, id string) int {
	t.Helper()
	resp, err := w.cli.Get(ctxT(t), "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), id) {
			n++
		}
	}
	return n
}

func (w world) lastActive(t *testing.T, id string) time.Time {
	t.Helper()
	sess, err := w.s.GetSession(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	at, err := w.s.LastActive(ctxT(t), sess)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// running marks session id as running a turn.
func (w world) running(t *testing.T, id string) {
	t.Helper()
	if _, err := w.s.UpdateSession(ctxT(t), id, func(s *castv1.Session) error {
		s.State = castv1.SessionState_SESSION_STATE_RUNNING
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// sweeper is a sweep of policy over w's store, its metrics and what it logs.
func (w world) sweeper(t *testing.T, policy string, dryRun bool) (*retention.Sweeper, *metrics.Retention, *observer.ObservedLogs) {
	t.Helper()
	m := metrics.NewRetention(prometheus.NewRegistry(), []string{"user:alice"})
	core, logs := observer.New(zap.InfoLevel)
	cfg := retention.DefaultConfig()
	cfg.DryRun = dryRun
	if err := cfg.Policy.Set(policy); err != nil {
		t.Fatal(err)
	}
	return retention.New(w.s, cfg, m, zap.New(core)), m, logs
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func (w world) exists(t *testing.T, id string) bool {
	t.Helper()
	_, err := w.s.GetSession(ctxT(t), id)
	if err != nil && !errs.HasReason(err, errs.ReasonNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestSweepPurgesOnlyExpiredCoveredSessions: of two principals' sessions,
// only those of the principal a rule covers, idle past its window, are
// purged (etcd keys and segments); the clock is the sweep's argument.
func TestSweepPurgesOnlyExpiredCoveredSessions(t *testing.T) {
	w := newWorld(t)
	aliceOld := w.session(t, "user:alice", 25, true)
	aliceSegs := w.objects(t)
	bobOld := w.session(t, "user:bob", 25, true)
	aliceNew := w.session(t, "user:alice", 5, false)
	aliceBusy := w.session(t, "user:alice", 5, false)
	w.running(t, aliceBusy)
	if len(aliceSegs) != 3 || len(w.objects(t)) != 6 {
		t.Fatalf("segments: %d of alice's, %d in all; want 3 and 6", len(aliceSegs), len(w.objects(t)))
	}
	lastOld, lastNew := w.lastActive(t, aliceOld), w.lastActive(t, aliceNew)
	if !lastOld.Before(lastNew) {
		t.Fatalf("the old session's last activity %v is not before the new one's %v", lastOld, lastNew)
	}

	sw, m, logs := w.sweeper(t, "user:alice=90d", false)

	// At lastNew + 90 days, only the old session of alice is past the window.
	now := lastNew.Add(90 * 24 * time.Hour)
	if n, err := sw.SweepAt(ctxT(t), now); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1 purged", n, err)
	}
	if w.exists(t, aliceOld) || !w.exists(t, aliceNew) || !w.exists(t, bobOld) || !w.exists(t, aliceBusy) {
		t.Fatalf("after the sweep: alice old %v, alice new %v, bob %v, busy %v; want only alice's old one gone",
			w.exists(t, aliceOld), w.exists(t, aliceNew), w.exists(t, bobOld), w.exists(t, aliceBusy))
	}
	if k := w.keysOf(t, aliceOld); k != 0 {
		t.Fatalf("%d etcd keys of the purged session remain", k)
	}
	left := w.objects(t)
	for key := range aliceSegs {
		if left[key] {
			t.Fatalf("segment %s of the purged session is still in the object store", key)
		}
	}
	if len(left) != 3 {
		t.Fatalf("%d segments left; want bob's 3", len(left))
	}
	if got := counter(t, m.Purged.WithLabelValues("user:alice")); got != 1 {
		t.Fatalf("cast_retention_purged_sessions_total{rule=user:alice} = %v", got)
	}
	lines := logs.FilterMessage("session purged by the retention policy").All()
	if len(lines) != 1 || lines[0].ContextMap()["session"] != aliceOld || lines[0].ContextMap()["rule"] != "user:alice=90d" {
		t.Fatalf("log lines %+v; want one naming %s and its rule", lines, aliceOld)
	}

	// The same instant again purges nothing: alice's new session is
	// exactly at its window, not past it.
	if n, err := sw.SweepAt(ctxT(t), now); err != nil || n != 0 {
		t.Fatalf("second sweep = %d, %v; want 0", n, err)
	}
	// Ten years on, alice's idle session goes; bob's, which no rule
	// covers, and alice's running one stay.
	if n, err := sw.SweepAt(ctxT(t), now.AddDate(10, 0, 0)); err != nil || n != 1 {
		t.Fatalf("sweep ten years on = %d, %v; want 1", n, err)
	}
	if w.exists(t, aliceNew) || !w.exists(t, bobOld) || !w.exists(t, aliceBusy) {
		t.Fatalf("ten years on: alice new %v, bob %v, busy %v", w.exists(t, aliceNew), w.exists(t, bobOld), w.exists(t, aliceBusy))
	}
	var read int
	err := w.s.Export(ctxT(t), bobOld, func(_ *castv1.Session, msgs []*castv1.Message) error { read += len(msgs); return nil })
	if err != nil || read != 25 || len(w.objects(t)) != 3 {
		t.Fatalf("bob's session reads %d of 25 messages (%v), %d segments", read, err, len(w.objects(t)))
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestDryRunPurgesNothing (--retain-dry-run): the sweep finds what the
// policy would purge, logs each session and sets the gauge to the
// sweep's count, and every session, key and segment stays.
func TestDryRunPurgesNothing(t *testing.T) {
	w := newWorld(t)
	aliceOld := w.session(t, "user:alice", 25, true)
	bob := w.session(t, "user:bob", 25, true)
	aliceNew := w.session(t, "user:alice", 5, false)
	aliceBusy := w.session(t, "user:alice", 5, false)
	w.running(t, aliceBusy)
	segs, keys := len(w.objects(t)), w.keysOf(t, aliceOld)

	sw, m, logs := w.sweeper(t, "user:alice=90d", true)
	now := w.lastActive(t, aliceNew).Add(90 * 24 * time.Hour)
	for _, tc := range []struct {
		at   time.Time
		want []string // reported
	}{
		{now, []string{aliceOld}},
		{now.AddDate(10, 0, 0), []string{aliceOld, aliceNew}}, // the running one is left, as a purge leaves it
	} {
		before := logs.Len()
		if n, err := sw.SweepAt(ctxT(t), tc.at); err != nil || n != len(tc.want) {
			t.Fatalf("dry run at %v = %d, %v; want %d", tc.at, n, err, len(tc.want))
		}
		var got []string
		for _, l := range logs.FilterMessage("session would be purged by the retention policy (dry run: kept)").All()[before:] {
			got = append(got, l.ContextMap()["session"].(string))
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Fatalf("dry run at %v logged %v; want %v", tc.at, got, tc.want)
		}
		if g := gauge(t, m.WouldPurge.WithLabelValues("user:alice")); g != float64(len(tc.want)) {
			t.Fatalf("cast_retention_would_purge_sessions{rule=user:alice} = %v; want %d", g, len(tc.want))
		}
	}
	for _, id := range []string{aliceOld, bob, aliceNew, aliceBusy} {
		if !w.exists(t, id) {
			t.Fatalf("the dry run purged session %s", id)
		}
	}
	if len(w.objects(t)) != segs || w.keysOf(t, aliceOld) != keys || counter(t, m.Purged.WithLabelValues("user:alice")) != 0 {
		t.Fatalf("after the dry run: %d segments (had %d), %d keys of %s (had %d), purged counter %v",
			len(w.objects(t)), segs, w.keysOf(t, aliceOld), aliceOld, keys, counter(t, m.Purged.WithLabelValues("user:alice")))
	}
}

// compacting is the store under a sweep whose etcd history is compacted
// as the sweep asks for its second page (as etcd's periodic compaction
// does to a sweep that outlives the retained history), and which records
// every session the sweep reads the activity of.
type compacting struct {
	*store.Store
	cli       *clientv3.Client
	compacted bool
	read      []string
}

func (c *compacting) ListSessions(ctx context.Context, pageSize int, token string, includeSub bool) ([]*castv1.Session, string, error) {
	if token != "" && !c.compacted {
		c.compacted = true
		resp, err := c.cli.Get(ctx, "compact")
		if err != nil {
			return nil, "", err
		}
		if _, err := c.cli.Compact(ctx, resp.Header.Revision); err != nil {
			return nil, "", err
		}
	}
	return c.Store.ListSessions(ctx, pageSize, token, includeSub)
}

func (c *compacting) LastActive(ctx context.Context, sess *castv1.Session) (time.Time, error) {
	c.read = append(c.read, sess.Id)
	return c.Store.LastActive(ctx, sess)
}

// TestSweepResumesAfterCompaction: a sweep whose listing expired (the
// store compacted past its page token's revision) goes on after the last
// session it handled, neither failing nor starting again from the first
// session, which on a store too big to sweep within the retained history
// would never finish.
func TestSweepResumesAfterCompaction(t *testing.T) {
	w := newWorld(t)
	var ids []string
	for range 5 {
		ids = append(ids, w.session(t, "user:alice", 1, false))
	}
	slices.Sort(ids)
	st := &compacting{Store: w.s, cli: w.cli}
	cfg := retention.DefaultConfig()
	if err := cfg.Policy.Set("user:alice=90d"); err != nil {
		t.Fatal(err)
	}
	sw := retention.New(st, cfg, metrics.NewRetention(prometheus.NewRegistry(), []string{"user:alice"}), zap.NewNop())
	retention.SetPage(sw, 2)

	n, err := sw.SweepAt(ctxT(t), time.Now().AddDate(1, 0, 0))
	if err != nil || n != len(ids) {
		t.Fatalf("sweep = %d, %v; want all %d purged", n, err, len(ids))
	}
	if !st.compacted || !slices.Equal(st.read, ids) {
		t.Fatalf("compacted %v; the sweep read the activity of %v; want each of %v once, in order", st.compacted, st.read, ids)
	}
	for _, id := range ids {
		if w.exists(t, id) {
			t.Fatalf("session %s was not purged", id)
		}
	}
}
