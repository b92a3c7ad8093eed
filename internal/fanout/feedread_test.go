package fanout_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/fanout"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// chunkReadFailer fails the first read of a large message's chunks once
// armed, as a busy etcd does (too many requests: clientv3 does not retry
// it): it sits between the store's client and etcd.
type chunkReadFailer struct {
	armed  atomic.Bool
	failed atomic.Int64
}

func (f *chunkReadFailer) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*etcdserverpb.RangeRequest); ok && strings.HasPrefix(string(r.Key), store.DefaultPrefix+"chunks/") && f.armed.CompareAndSwap(true, false) {
		f.failed.Add(1)
		return rpctypes.ErrGRPCRequestTooManyRequests
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

// A large message whose chunks the feed fails to read still reaches its
// session's watchers, though no later message of the session comes to
// show them the gap: they catch up from the store.
func TestWatcherGetsAMessageTheFeedFailedToRead(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	var f chunkReadFailer
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, MaxCallSendMsgSize: 2 << 20,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(f.intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx := ctxT(t)
	cfg := store.DefaultConfig()
	cfg.QuotaBytes = 256 << 20
	st, err := store.New(ctx, cli, cfg, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, ep, st, fanout.DefaultConfig(), nil)
	sid := e.session(t)
	e.appendN(t, 2, 10, sid)
	// Once the feed runs, a watcher joined after it reads no chunks but
	// for its catch-up: the one read that fails is the feed's.
	testharness.WaitFor(t, 30*time.Second, "the feed to start", func() bool { return e.hub.Stats().Feeds >= 1 })
	w := e.watch(ctx, "p", sid, 1, 3, nil)
	<-w.first
	f.armed.Store(true)
	e.appendN(t, 1, 2*store.DefaultChunkBytes, sid)           // seq 3, chunked, and the session's last
	bound, cancel := context.WithTimeout(ctx, 30*time.Second) // a bound on the failure, not a pace
	defer cancel()
	w.check(t, bound, "the watcher of a message the feed failed to read", 1)
	if n := f.failed.Load(); n != 1 {
		t.Fatalf("%d chunk reads failed, want the feed's one", n)
	}
}
