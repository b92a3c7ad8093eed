package store_test

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A heartbeat is a lease renewal and writes nothing to etcd (the store's
// revision stays put across a hundred of them), while it keeps the node
// connected past its lease TTL; NodeSeen is the one write, made seldom.
func TestHeartbeatsWriteNothing(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := ctxT(t)
	rev := func() int64 {
		r, err := raw.Get(ctx, "probe")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	const ttl = 2 * time.Second
	l, err := s.RegisterNode(ctx, &castv1.Node{Name: "busy"}, "test", ttl)
	if err != nil {
		t.Fatal(err)
	}
	before := rev()
	// Beat for two TTLs: without the renewals the lease would lapse.
	tick := time.NewTicker(ttl / 100)
	defer tick.Stop()
	for range 200 {
		if err := s.Heartbeat(ctx, l); err != nil {
			t.Fatal(err)
		}
		<-tick.C
	}
	if after := rev(); after != before {
		t.Fatalf("200 heartbeats moved the revision from %d to %d: they wrote to etcd", before, after)
	}
	nodes, err := s.ListNodes(ctx)
	if err != nil || len(nodes) != 1 || !nodes[0].Connected {
		t.Fatalf("after two TTLs of heartbeats: %v, %v (want connected)", nodes, err)
	}
	if err := s.NodeSeen(ctx, "busy", l, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if rev() != before+1 {
		t.Fatal("NodeSeen is one write")
	}
}

// Heartbeats of many nodes at once share one keep-alive stream: each gets
// its own lease's answer, a revoked lease answers ErrLeaseExpired while
// the others renew, and when the connection to etcd drops the stream's
// waiters get an error and the next heartbeats open a new stream.
func TestHeartbeatsOfManyNodesShareAStream(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	u, err := url.Parse(ep)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testharness.StartProxy(t, u.Host)
	s := testharness.OpenStore(t, "http://"+proxy.Addr, nil)
	raw := etcdClient(t, ep)
	ctx := ctxT(t)
	const nodes = 40
	leases := make([]fence.Lease, nodes)
	for i := range leases {
		if leases[i], err = s.RegisterNode(ctx, &castv1.Node{Name: fmt.Sprintf("n%d", i)}, "test", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	gone := leases[7]
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(gone)); err != nil {
		t.Fatal(err)
	}
	beatAll := func() []error {
		out := make([]error, nodes)
		var wg sync.WaitGroup
		for i, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if out[i] = s.Heartbeat(ctx, l); out[i] != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		return out
	}
	for i, err := range beatAll() {
		switch {
		case leases[i] == gone && !errors.Is(err, store.ErrLeaseExpired):
			t.Errorf("the revoked lease's heartbeat: %v, want ErrLeaseExpired", err)
		case leases[i] != gone && err != nil:
			t.Errorf("node %d's heartbeat: %v", i, err)
		}
	}
	proxy.Reset() // the connection, and the stream on it, drop
	testharness.WaitFor(t, 30*time.Second, "heartbeats on a new stream", func() bool {
		for i, err := range beatAll() {
			if leases[i] != gone && err != nil {
				return false
			}
		}
		return true
	})
}
