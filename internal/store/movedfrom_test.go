package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// countingKV counts the reads and txns a store sends to etcd.
type countingKV struct {
	clientv3.KV
	n *atomic.Int64
}

func (k countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.n.Add(1)
	return k.KV.Get(ctx, key, opts...)
}

func (k countingKV) Txn(ctx context.Context) clientv3.Txn {
	k.n.Add(1)
	return k.KV.Txn(ctx)
}

// countingStore opens a store over etcd at ep whose reads and txns are
// counted; it returns its client too.
func countingStore(t *testing.T, ep string) (*store.Store, *atomic.Int64, *clientv3.Client) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	reads := &atomic.Int64{}
	cli.KV = countingKV{KV: cli.KV, n: reads}
	s, err := store.New(ctxT(t), cli, store.DefaultConfig(), metrics.NewStore(nil), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, reads, cli
}

// A node reconnecting with sessions it lost is told the owner of those a
// migration from it moved (its checkout is cleaned once it hears). That
// look-up read every migration record ever stored, each in a txn of its
// own, on every such reconnect; it reads the lost sessions' owner and
// migrated/{s}/{node} keys only: one txn however many migrations exist.
func TestMovedFromReadsOnlyTheLostSessions(t *testing.T) {
	s, reads, _ := countingStore(t, testharness.StartEtcd(t, nil))
	ctx := ctxT(t)
	for _, n := range []string{"n2", "n3"} {
		if _, err := s.RegisterNode(ctx, &castv1.Node{Name: n}, "test", 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	moved := newSession(t, s, "n1")     // n1 → n2
	movedOn := newSession(t, s, "n1")   // n1 → n2 → n3
	movedBack := newSession(t, s, "n1") // n1 → n2 → n1 → n2
	elsewhere := newSession(t, s, "n2") // n2 → n3: never n1's
	stayed := newSession(t, s, "n1")    // still n1's
	handover(t, s, moved.Session.Id, "n1", moved.Token, "n2")
	handover(t, s, movedOn.Session.Id, "n2", handover(t, s, movedOn.Session.Id, "n1", movedOn.Token, "n2"), "n3")
	tok := handover(t, s, movedBack.Session.Id, "n1", movedBack.Token, "n2")
	tok = handover(t, s, movedBack.Session.Id, "n2", tok, "n1")
	handover(t, s, movedBack.Session.Id, "n1", tok, "n2")
	handover(t, s, elsewhere.Session.Id, "n2", elsewhere.Token, "n3")
	for i := range 60 { // migrations that have nothing to do with it
		if _, _, err := s.CreateMigration(ctx, &castv1.Migration{Id: fmt.Sprintf("mig-old-%d", i), TargetNode: "n2",
			Sessions: []*castv1.MigrationSession{{SessionId: fmt.Sprintf("s%d", i), SourceNode: "n1", State: castv1.MigrationState_MIGRATION_STATE_SUCCEEDED}}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	lost := []string{moved.Session.Id, movedOn.Session.Id, movedBack.Session.Id, elsewhere.Session.Id, stayed.Session.Id, "nosuchsession"}
	reads.Store(0)
	got, err := s.MovedFrom(ctx, "n1", lost)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("MovedFrom of %d sessions sent %d reads, want 1", len(lost), n)
	}
	want := map[string]string{moved.Session.Id: "n2", movedBack.Session.Id: "n2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("MovedFrom(n1) = %v, want %v (moved, moved back: n2; moved on, another's, kept, unknown: none)", got, want)
	}
	// Past one txn's worth of sessions the reads grow by the lost, not by
	// the migrations.
	many := make([]string, 0, 200)
	for i := range 200 {
		many = append(many, fmt.Sprintf("lost%03d", i))
	}
	reads.Store(0)
	if _, err := s.MovedFrom(ctx, "n1", append(many, moved.Session.Id)); err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 4 {
		t.Errorf("MovedFrom of 201 sessions sent %d reads, want 4 (64 a txn)", n)
	}
}
