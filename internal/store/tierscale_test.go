package store_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/objstore/s3test"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// scaleEnv runs TestTierKeepsEtcdFlat at the scale: 100,000
// messages.
const scaleEnv = "CAST_TIER_SCALE"

// TestTierKeepsEtcdFlat appends ten times etcd's quota of history to one
// session, moving it to a real S3 server as it goes (and compacting etcd,
// as its auto-compaction does), two hours apart by the tiering's clock
// against a one-hour dedupe window: every append is taken, etcd's file
// stays under its quota, and what etcd keeps stays flat — the hot window
// only, the moved messages' client id records leaving with them; the
// export then reads back every message in order.
func TestTierKeepsEtcdFlat(t *testing.T) {
	// 10x a 10 MiB quota in 1600 messages of 64 KiB (few messages: the
	// race detector's run costs by the message), batches of 10.
	quota, total, size, batchN, tierEvery := int64(10<<20), 1600, 64<<10, 10, 2
	hot, minSeg, segN := int64(20), int64(20), 100
	if testharness.RaceOn { // 2.5x a 4 MiB quota: the 10x figure is the plain run's (make test runs -race; etcd runs raced in this process, by the byte)
		quota, total, size = 4<<20, 640, 16<<10
	}
	if os.Getenv(scaleEnv) != "" {
		// 12x a 16 MiB quota in 100,000 messages of 2 KiB, moved every
		// 1,000 messages (compacting etcd each time costs by the round).
		quota, total, size, batchN, tierEvery = 16<<20, 100000, 2<<10, 100, 10
		hot, minSeg, segN = 500, 500, 2000
	}
	etcd := testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.QuotaBytes = quota })
	s := testharness.OpenStore(t, etcd, func(c *store.Config) { c.QuotaBytes, c.QuotaPoll = quota, 10*time.Millisecond })
	srv := s3test.Start(t)
	tc := store.DefaultTierConfig()
	tc.HotMessages, tc.MinSegment, tc.SegmentMessages, tc.Every = hot, minSeg, segN, time.Hour
	tc.DedupeWindow = time.Hour
	clock := time.Now()
	if err := s.UseObjects(srv.Open(t), tc, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); s.Run(runCtx) }() // polls etcd's size for the quota guard
	t.Cleanup(func() { stop(); <-ran })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	c := newSession(t, s, "n1")
	rng := rand.New(rand.NewPCG(1, 2))
	var appended, maxFile, midKept int64
	midAt := 0
	sent := fnv.New64a() // every text appended, in order
	start := time.Now()
	for i := 0; i < total; i += batchN {
		var batch []*castv1.Message
		for range batchN {
			text := testharness.Pooled(rng, size)
			appended += int64(len(text))
			sent.Write([]byte(text))
			batch = append(batch, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text})
		}
		if _, err := s.Append(ctxT(t), c.Session.Id, batch, fence.Guard{}); err != nil {
			file, inUse := testharness.EtcdSize(t, cli)
			t.Fatalf("append at %d messages (%d MiB of history; etcd file %d KiB, %d KiB in use): %v", i, appended>>20, file>>10, inUse>>10, err)
		}
		if (i/batchN)%tierEvery != tierEvery-1 {
			continue
		}
		clock = clock.Add(2 * time.Hour)
		maxFile = max(maxFile, testharness.TierRound(t, s, cli, clock))
		if midAt == 0 && appended >= quota {
			midKept, midAt = testharness.KeptBesideMessages(t, cli), i+batchN
		}
	}
	_, inUse := testharness.EtcdSize(t, cli)
	kept := testharness.KeptBesideMessages(t, cli)
	t.Logf("%d messages, %d MiB of history (%.1fx etcd's %d MiB quota) appended and moved in %v; etcd file at most %d KiB, %d KiB in use at the end",
		total, appended>>20, float64(appended)/float64(quota), quota>>20, time.Since(start).Round(time.Second), maxFile>>10, inUse>>10)
	if appended < 10*quota && !testharness.RaceOn {
		t.Fatalf("history %d bytes is not 10x the quota", appended)
	}
	if maxFile >= quota {
		t.Fatalf("etcd's file reached %d bytes, quota %d", maxFile, quota)
	}
	// Nothing per message moved stays. Beside the messages waiting in
	// etcd (the hot tail, a run not yet MinSegment long, what came since
	// the last move), etcd keeps the same bytes at both readings but for
	// the waiting messages' client id records (~160 bytes of key and
	// value each) and one index entry per segment (~110 bytes). Records
	// left behind would add ~160 bytes per message moved (230 KiB over
	// the plain run's 1,440 messages, 13 MiB at scale). Keys and values
	// are counted, not bbolt's pages in use: those move by hundreds of
	// KiB with pages a compaction has not freed yet.
	t.Logf("etcd holds %d KiB beside the message envelopes at %d messages, %d KiB at %d", midKept>>10, midAt, kept>>10, total)
	if grew, bound := kept-midKept, 16<<10+256*(hot+minSeg+int64(tierEvery*batchN)); grew > bound {
		t.Fatalf("etcd grew %d bytes beside the messages over %d messages; at most %d expected", grew, total-midAt, bound)
	}
	msgs, cids := testharness.CountKeys(t, cli, "msgs/"), testharness.CountKeys(t, cli, "cids/")
	if cids > msgs {
		t.Fatalf("etcd holds %d client id records for %d messages: the moved ones' did not leave", cids, msgs)
	}
	n, got, readStart := 0, fnv.New64a(), time.Now()
	err = s.Export(ctxT(t), c.Session.Id, func(_ *castv1.Session, msgs []*castv1.Message) error {
		for _, m := range msgs {
			if n++; m.Seq != int64(n) {
				return fmt.Errorf("message %d has seq %d", n, m.Seq)
			}
			got.Write([]byte(m.Text))
		}
		return nil
	})
	if err != nil || n != total {
		t.Fatalf("export read %d of %d messages: %v", n, total, err)
	}
	if got.Sum64() != sent.Sum64() {
		t.Fatalf("export read %d messages whose texts are not the ones appended", n)
	}
	t.Logf("export read back all %d messages (%d MiB) whole in %v", n, appended>>20, time.Since(readStart).Round(time.Millisecond))
}
