package controlplane_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/testharness"
)

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Writers keep sending through a control plane restart, retrying each
// message with its request id while the outcome is unknown. Every
// acknowledged message must be stored exactly once, at the seq it was
// acknowledged with, and seqs must stay dense.
func TestRestartMidAppendsLosesNothing(t *testing.T) {
	cfg := testharness.ControlPlaneConfig(t)
	cfg.Listen = freeAddr(t)
	start, srv, c, sess := restartable(t, cfg)
	ctx := ctxT(t)
	const writers, each = 4, 60
	var mu sync.Mutex
	acked := map[string]int64{} // request id -> seq
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				req := &castv1.SendMessageRequest{SessionId: sess.Id, Text: "m", RequestId: ids.NewClientID()}
				for attempt := 0; attempt < 200; attempt++ { // bounded: ~40s at most
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					resp, err := c.Sessions.SendMessage(cctx, req)
					cancel()
					if err == nil {
						mu.Lock()
						acked[req.RequestId] = resp.Message.Seq
						mu.Unlock()
						break
					}
					if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
						t.Errorf("send: %v", err)
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	testharness.WaitFor(t, 30*time.Second, "first acknowledgements", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 40
	})
	srv.Stop()
	time.Sleep(500 * time.Millisecond) // writers see the outage
	start()
	wg.Wait()
	if len(acked) != writers*each {
		t.Fatalf("%d of %d messages acknowledged", len(acked), writers*each)
	}
	stored := map[string]int64{}
	next := int64(1)
	tok := ""
	for {
		resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.Messages {
			if m.Seq != next {
				t.Fatalf("seq %d, want %d", m.Seq, next)
			}
			next++
			if _, dup := stored[m.ClientId]; dup {
				t.Fatalf("request %s stored twice", m.ClientId)
			}
			stored[m.ClientId] = m.Seq
		}
		if tok = resp.NextPageToken; tok == "" {
			break
		}
	}
	for rid, seq := range acked {
		if stored[rid] != seq {
			t.Fatalf("acknowledged %s at seq %d, stored at %d", rid, seq, stored[rid])
		}
	}
	if len(stored) != len(acked) {
		t.Fatalf("stored %d, acknowledged %d", len(stored), len(acked))
	}
}

// restartable starts a control plane on cfg (a fixed listen address, so
// clients reconnect after a restart), a node n1 and a session on it;
// start starts the control plane again.
func restartable(t *testing.T, cfg controlplane.Config) (start func() *controlplane.Server, srv *controlplane.Server, c *client.Client, sess *castv1.Session) {
	t.Helper()
	start = func() *controlplane.Server {
		return testharness.StartControlPlane(t, func(c *controlplane.Config) { *c = cfg })
	}
	srv = start()
	c = testharness.Dial(t, cfg.Listen)
	testharness.StartNode(t, cfg.Listen, "n1", nil)
	waitConnected(t, c, "n1", true)
	sess, err := c.Sessions.CreateSession(ctxT(t), &castv1.CreateSessionRequest{Agent: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	return start, srv, c, sess
}

// A node that restarts gets its sessions re-assigned and catches up on the
// user messages sent while it was away, each exactly once.
func TestNodeRestartCatchesUp(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	dir := filepath.Join(t.TempDir(), "node")
	withDir := func(cfg *node.Config) { cfg.DataDir = dir }
	stop := testharness.StartNode(t, srv.Addr(), "n1", withDir)
	waitConnected(t, c, "n1", true)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	delivered := func() int64 {
		b, err := statefile.Read(filepath.Join(dir, "state.json"), "sessions")
		if err != nil {
			return -1
		}
		var st struct {
			Sessions map[string]struct {
				ReceivedSeq int64 `json:"received_seq"`
			} `json:"sessions"`
		}
		if json.Unmarshal(b, &st) != nil {
			return -1
		}
		return st.Sessions[sess.Id].ReceivedSeq
	}
	testharness.WaitFor(t, 10*time.Second, "first delivery", func() bool { return delivered() == 1 })
	stop()
	waitConnected(t, c, "n1", false)
	for _, text := range []string{"two", "three"} {
		if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	testharness.StartNode(t, srv.Addr(), "n1", withDir)
	testharness.WaitFor(t, 10*time.Second, "catch-up delivery", func() bool { return delivered() == 3 })
}
