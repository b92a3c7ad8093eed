package testharness

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
)

// CompactingStore is a store whose session listings expire midway: it
// lists page sessions at a time, whatever page size it is asked for (so a
// few sessions make several pages), and compacts etcd just before the
// first page asked for with a page token, as a listing of a big store
// that outlived the retained history finds it.
type CompactingStore struct {
	*store.Store
	cli  *clientv3.Client
	page int
	// Compacted: a listing's page token was used after a compaction.
	Compacted bool
	// Listed are the ids of the sessions handed out, in order.
	Listed []string
}

// NewCompactingStore wraps st, a store over the etcd at endpoint.
func NewCompactingStore(t testing.TB, endpoint string, st *store.Store, page int) *CompactingStore {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &CompactingStore{Store: st, cli: cli, page: page}
}

func (c *CompactingStore) ListSessions(ctx context.Context, _ int, token string, includeSub bool) ([]*castv1.Session, string, error) {
	if token != "" && !c.Compacted {
		c.Compacted = true
		// A write first: compacting at the listing's own revision
		// would keep it readable.
		resp, err := c.cli.Put(ctx, "compact", "")
		if err != nil {
			return nil, "", err
		}
		if _, err := c.cli.Compact(ctx, resp.Header.Revision); err != nil {
			return nil, "", err
		}
	}
	return c.listed(c.Store.ListSessions(ctx, c.page, token, includeSub))
}

func (c *CompactingStore) ListSessionsAfter(ctx context.Context, _ int, after string, includeSub bool) ([]*castv1.Session, string, error) {
	return c.listed(c.Store.ListSessionsAfter(ctx, c.page, after, includeSub))
}

func (c *CompactingStore) listed(page []*castv1.Session, next string, err error) ([]*castv1.Session, string, error) {
	for _, s := range page {
		c.Listed = append(c.Listed, s.Id)
	}
	return page, next, err
}

// Sessions makes n sessions of claude owned by node (registered in st),
// and returns their ids in a listing's order.
func Sessions(t testing.TB, st *store.Store, node string, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		c, err := st.CreateSession(context.Background(), fence.CreateParams{Agent: "claude", Node: node, Creator: "user:test"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.Session.Id)
	}
	slices.Sort(ids)
	return ids
}
