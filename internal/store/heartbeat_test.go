package store_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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

// A node that goes down shows when it was last seen, not when it
// connected: `cast nodes` said LAST SEEN "4m ago" for a dev node stopped
// seconds after a NodeSeen, since the seen time lived only in the leased
// liveness key, gone with the lease.
func TestNodeDownKeepsLastSeen(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	ctx := ctxT(t)
	l, err := s.RegisterNode(ctx, &castv1.Node{Name: "gone"}, "test", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	seen := time.Now() // after the connect time RegisterNode recorded
	if err := s.NodeSeen(ctx, "gone", l, "test", seen); err != nil {
		t.Fatal(err)
	}
	if err := s.UnregisterNode(ctx, l); err != nil {
		t.Fatal(err)
	}
	nodes, err := s.ListNodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Connected {
		t.Fatalf("after its lease was revoked: %v, %v (want one node, down)", nodes, err)
	}
	if got := nodes[0].LastSeenTime.AsTime(); got.Before(seen) {
		t.Fatalf("down node's last_seen_time %s is before its last NodeSeen at %s (connect time %s)",
			got, seen, nodes[0].ConnectTime.AsTime())
	}
	if err := s.NodeSeen(ctx, "gone", l, "test", seen); !errors.Is(err, store.ErrLeaseExpired) {
		t.Fatalf("NodeSeen on a revoked lease: %v, want ErrLeaseExpired", err)
	}
	// cast node rm forgets the node whole, its seen time too.
	if _, err := s.DeleteNode(ctx, "gone", false); err != nil {
		t.Fatal(err)
	}
	if nodes, err := s.ListNodes(ctx); err != nil || len(nodes) != 0 {
		t.Fatalf("after DeleteNode: %v, %v (want none)", nodes, err)
	}
}
