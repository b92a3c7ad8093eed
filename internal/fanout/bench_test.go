package fanout_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fanout"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// BenchmarkHubFanout is BenchmarkWatchFanout (internal/controlplane)
// without gRPC: one append's latency to N hub watchers of a session (from
// the append's call to each watcher's callback), p50 and p99 over every
// watcher of every append, at N = 10, 1,000 and 10,000, and p99 against
// the p99 at 10 in the same run. What it adds to the store's commit is
// the hub's own share of a WatchSession's fan-out. -short stops at 1,000.
//
//	go test -run '^$' -bench HubFanout -benchtime 1x ./internal/fanout
func BenchmarkHubFanout(b *testing.B) {
	sizes := testharness.FanoutSizes()
	cfg := fanout.DefaultConfig()
	cfg.MaxPerPrincipal = 20000
	e := newEnv(b, cfg, nil)
	sid := e.session(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cur atomic.Pointer[hubRound]
	open := 0
	var base time.Duration
	b.ResetTimer()
	for range b.N {
		for _, n := range sizes {
			for ; open < n; open++ {
				i := open
				opened := make(chan struct{})
				go func() {
					_ = e.hub.Watch(ctx, "bench", sid, 0, func(ev fanout.Event) error {
						if ev.Message == nil {
							close(opened)
							return nil
						}
						if r := cur.Load(); r != nil && ev.Message.Seq == r.seq {
							r.lat[i] = time.Since(r.start)
							r.wg.Done()
						}
						return nil
					})
				}()
				<-opened
			}
			var all []time.Duration
			for range 40 {
				last, err := e.st.GetSession(ctx, sid)
				if err != nil {
					b.Fatal(err)
				}
				r := &hubRound{seq: last.LastSeq + 1, lat: make([]time.Duration, n)}
				r.wg.Add(n)
				r.start = time.Now()
				cur.Store(r)
				m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: "x"}
				if _, err := e.st.Append(ctx, sid, []*castv1.Message{m}, fence.Guard{}); err != nil {
					b.Fatal(err)
				}
				r.wg.Wait()
				all = append(all, r.lat...)
			}
			p99, line := testharness.FanoutLatency(b, n, all, base)
			if n == sizes[0] {
				base = p99
			}
			b.Logf("%s  fell behind %d", line, e.hub.Stats().FellBehind)
		}
	}
}

// hubRound is one append: when it was sent and when each watcher got it.
type hubRound struct {
	seq   int64
	start time.Time
	lat   []time.Duration
	wg    sync.WaitGroup
}
