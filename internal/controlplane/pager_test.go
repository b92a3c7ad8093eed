package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// A compaction between two pages (the hourly one, or NOSPACE recovery)
// invalidates the page token's revision; the one pager resumes after the
// last message it handed out, so a range read sees every message once.
func TestPagerRidesOutCompaction(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.EtcdEndpoints = []string{ep}; c.DataDir = "" })
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, c, "n1", true)
	ctx := ctxFor(t, 5*time.Minute)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	// Three pages of 50 (the default page is 500: the same three pages
	// would take 1,200 sends, each a round trip and an etcd txn).
	const n, page = 120, 50
	for i := 1; i <= n; i++ {
		req := &castv1.SendMessageRequest{SessionId: sess.Id, Text: fmt.Sprint("m", i), RequestId: ids.NewClientID()}
		if _, err := c.Sessions.SendMessage(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	var got []int64
	err = c.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: sess.Id, EndSeq: n, PageSize: page}, func(m *castv1.Message) error {
		got = append(got, m.Seq)
		if len(got) == 1 { // the first page is read: compact past its revision
			resp, err := etcd.Get(context.Background(), "compact-marker")
			if err != nil {
				return err
			}
			if _, err := etcd.Put(context.Background(), "compact-marker", "x"); err != nil {
				return err
			}
			_, err = etcd.Compact(context.Background(), resp.Header.Revision+1)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read across a compaction: %v after %d messages", err, len(got))
	}
	if len(got) != n {
		t.Fatalf("read %d messages, want %d", len(got), n)
	}
	for i, seq := range got {
		if seq != int64(i+1) {
			t.Fatalf("message %d has seq %d", i, seq)
		}
	}
}
