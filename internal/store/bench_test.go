package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// BenchmarkStoreAppend is the store's share of an append (no gRPC, TLS or
// token check): 64 writers on a session each, one 512-byte message per
// call, beside raw etcd puts of the same size at the same concurrency on
// the same etcd in the same run, and the ratio. With the control plane's
// BenchmarkAppend it tells the group commit's cost from the API's.
//
//	go test -run '^$' -bench StoreAppend -benchtime 5x ./internal/store
func BenchmarkStoreAppend(b *testing.B) {
	ep := testharness.StartEtcd(b, func(c *testharness.EtcdConfig) { c.QuotaBytes = 2 << 30 })
	s := testharness.OpenStore(b, ep, func(c *store.Config) { c.QuotaBytes = 2 << 30 })
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		b.Fatal(err)
	}
	const writers, perWriter = 64, 16
	sids := make([]string, writers)
	for i := range sids {
		c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
		if err != nil {
			b.Fatal(err)
		}
		sids[i] = c.Session.Id
	}
	text := strings.Repeat("x", 512)
	var app, put time.Duration
	txns0 := store.AppendTxns(s)
	b.ResetTimer()
	for range b.N {
		app += parallel(b, writers, perWriter, func(w int) error {
			_, err := s.Append(ctx, sids[w], []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: text}}, fence.Guard{})
			return err
		})
		put += parallel(b, writers, perWriter, func(w int) error {
			_, err := raw.Put(ctx, fmt.Sprintf("/bench/%s", ids.NewClientID()), text)
			return err
		})
	}
	b.StopTimer()
	n := float64(b.N * writers * perWriter)
	b.ReportMetric(n/app.Seconds(), "appends/s")
	b.ReportMetric(n/put.Seconds(), "etcd_puts/s")
	b.ReportMetric(put.Seconds()/app.Seconds(), "throughput_ratio")
	b.ReportMetric(n/float64(store.AppendTxns(s)-txns0), "appends/txn")
}

// parallel runs each calls on every one of writers goroutines and returns
// the wall time.
func parallel(b *testing.B, writers, each int, call func(w int) error) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := call(w); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
