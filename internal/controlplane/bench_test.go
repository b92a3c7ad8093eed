package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// BenchmarkAppend compares message appends through the gRPC API (validation,
// dense seq assignment, idempotency keys, group commit) with the same
// number of plain etcd puts of the same size at the same concurrency, on
// the same etcd in the same run, and reports the ratio: machines are noisy,
// ratios are what to compare across runs.
//
//	go test -run '^$' -bench Append -benchtime 5x ./internal/controlplane
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchAppend(b, writers) })
	}
}

func benchAppend(b *testing.B, writers int) {
	ep := testharness.StartEtcd(b, func(c *testharness.EtcdConfig) { c.QuotaBytes = 2 << 30 })
	srv := testharness.StartControlPlane(b, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.Store.QuotaBytes = 2 << 30
	})
	c := testharness.Dial(b, srv.Addr())
	testharness.StartNode(b, srv.Addr(), "bench", nil)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	var sess *castv1.Session
	testharness.WaitFor(b, 20*time.Second, "bench session", func() bool {
		sess, err = c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude"})
		return err == nil
	})
	const perRound = 256
	text := strings.Repeat("x", 512)
	viaGRPC := func(i int) error {
		_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: text, RequestId: ids.NewClientID()})
		return err
	}
	viaEtcd := func(i int) error {
		_, err := raw.Put(ctx, fmt.Sprintf("/bench/%s/%d", ids.NewClientID(), i), text)
		return err
	}
	var grpcLat, etcdLat []time.Duration
	var grpcTime, etcdTime time.Duration
	b.ResetTimer()
	for range b.N {
		d, lat := round(b, writers, perRound, viaGRPC)
		grpcTime, grpcLat = grpcTime+d, append(grpcLat, lat...)
		d, lat = round(b, writers, perRound, viaEtcd)
		etcdTime, etcdLat = etcdTime+d, append(etcdLat, lat...)
	}
	b.StopTimer()
	n := float64(b.N * perRound)
	gps, eps := n/grpcTime.Seconds(), n/etcdTime.Seconds()
	b.ReportMetric(gps, "grpc_msgs/s")
	b.ReportMetric(eps, "etcd_puts/s")
	b.ReportMetric(gps/eps, "throughput_ratio")
	b.ReportMetric(ms(pct(grpcLat, 50)), "grpc_p50_ms")
	b.ReportMetric(ms(pct(etcdLat, 50)), "etcd_p50_ms")
	b.ReportMetric(ms(pct(grpcLat, 99)), "grpc_p99_ms")
	b.ReportMetric(ms(pct(etcdLat, 99)), "etcd_p99_ms")
	b.ReportMetric(float64(pct(grpcLat, 50))/float64(pct(etcdLat, 50)), "p50_latency_ratio")
}

// round runs total calls over writers goroutines and returns the wall time
// and each call's latency.
func round(b *testing.B, writers, total int, call func(int) error) (time.Duration, []time.Duration) {
	lat := make([]time.Duration, total)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += writers {
				t0 := time.Now()
				if err := call(i); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return time.Since(start), lat
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
