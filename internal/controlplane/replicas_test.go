package controlplane_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/testharness"
)

// Two replicas share one external etcd (the --etcd-endpoints path). A node
// connected to replica A is assigned and delivered work created through
// replica B, and appends through both stay dense.
func TestReplicasShareExternalEtcd(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	external := func(c *controlplane.Config) { c.EtcdEndpoints = []string{ep}; c.DataDir = "" }
	a := testharness.StartControlPlane(t, external)
	b := testharness.StartControlPlane(t, external)
	ca, cb := testharness.Dial(t, a.Addr()), testharness.Dial(t, b.Addr())
	dir := filepath.Join(t.TempDir(), "node")
	testharness.StartNode(t, a.Addr(), "n1", func(c *node.Config) { c.DataDir = dir })
	waitConnected(t, cb, "n1", true)
	ctx := ctxT(t)
	sess, err := cb.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Text: "via b"})
	if err != nil {
		t.Fatal(err)
	}
	const each = 50
	var wg sync.WaitGroup
	for i, c := range []*client.Client{ca, cb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				req := &castv1.SendMessageRequest{SessionId: sess.Id, Text: fmt.Sprintf("r%d-%d", i, j), RequestId: ids.NewClientID()}
				if _, err := c.Sessions.SendMessage(ctx, req); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	const total = 1 + 2*each
	resp, err := ca.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id})
	if err != nil || len(resp.Messages) != total {
		t.Fatalf("read %d messages (%v), want %d", len(resp.GetMessages()), err, total)
	}
	for i, m := range resp.Messages {
		if m.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", m.Seq, i)
		}
	}
	testharness.WaitFor(t, 15*time.Second, "node delivery of every message", func() bool {
		b, err := statefile.Read(filepath.Join(dir, "state.json"), "sessions")
		if err != nil {
			return false
		}
		var st struct {
			Sessions map[string]struct {
				ReceivedSeq int64 `json:"received_seq"`
			} `json:"sessions"`
		}
		return json.Unmarshal(b, &st) == nil && st.Sessions[sess.Id].ReceivedSeq == total
	})
}
