package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// etcdClient is a raw client on ep, for looking behind the store's back.
func etcdClient(t *testing.T, ep string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, MaxCallSendMsgSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// chunkKeys counts the chunk keys of large messages (every layout).
func chunkKeys(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{store.DefaultPrefix + "chunks/", store.DefaultPrefix + "blobs/"} {
		resp, err := cli.Get(ctxT(t), p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		n += resp.Count
	}
	return n
}

// bigText is n bytes of varied text (varied so nothing compresses it away).
func bigText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "row %d ✓ %x\n", i, i*7919)
	}
	return strings.ToValidUTF8(b.String()[:n], "")
}

func toolResult(cid, out string) *castv1.Message {
	return &castv1.Message{ClientId: cid, Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
		ToolResult: &castv1.ToolResult{CallId: "c1", Output: out}}
}

// readAll reads the whole transcript through ListMessages and Export.
func readAll(t *testing.T, s *store.Store, sid string) []*castv1.Message {
	t.Helper()
	ctx := ctxT(t)
	msgs, _, err := s.ListMessages(ctx, sid, 1, 0, 100, "")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	n := 0
	if err := s.Export(ctx, sid, func(_ *castv1.Session, page []*castv1.Message) error { n += len(page); return nil }); err != nil {
		t.Fatalf("export: %v", err)
	}
	if n != len(msgs) {
		t.Fatalf("export read %d messages, list %d", n, len(msgs))
	}
	return msgs
}

// A retry with the same client id returns the committed message and leaves
// it readable byte-exact, whatever its size (the server stamps a new
// create_time on every try, so a retry's bytes always differ).
func TestRetryKeepsLargeMessagesReadable(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	for _, size := range []int{100 << 10, 300 << 10, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := newSession(t, s, "n1")
			ctx := ctxT(t)
			out, cid := bigText(size), ids.NewClientID()
			first, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(cid, out)}, fence.Guard{})
			if err != nil {
				t.Fatal(err)
			}
			committed := proto.Clone(first[0]).(*castv1.Message)
			if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg("between")}, fence.Guard{}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				again, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(cid, out)}, fence.Guard{})
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(again[0], committed) {
					t.Fatalf("retry returned seq %d at %v, want the committed seq %d at %v",
						again[0].Seq, again[0].CreateTime.AsTime(), committed.Seq, committed.CreateTime.AsTime())
				}
			}
			msgs := readAll(t, s, c.Session.Id)
			if len(msgs) != 2 || !proto.Equal(msgs[0], committed) || msgs[0].ToolResult.Output != out {
				t.Fatalf("read back %d messages; first equal to committed: %v", len(msgs), len(msgs) > 0 && proto.Equal(msgs[0], committed))
			}
		})
	}
}

// The same client id with another body is refused, never echoed, and the
// stored message is kept as it was.
func TestClientIDReuseIsRefused(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	small, large := userMsg("the original"), toolResult(ids.NewClientID(), bigText(600<<10))
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{small, large}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		msgs []*castv1.Message
	}{
		{"small, new text", []*castv1.Message{{ClientId: small.ClientId, Kind: small.Kind, Text: "something else"}}},
		{"small, other kind", []*castv1.Message{{ClientId: small.ClientId, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "the original"}}},
		{"large, new output", []*castv1.Message{toolResult(large.ClientId, bigText(600<<10)+"!")}},
		{"twice in one call", []*castv1.Message{userMsg("a"), {ClientId: "dup-1", Kind: small.Kind, Text: "x"}, {ClientId: "dup-1", Kind: small.Kind, Text: "y"}}},
	}
	for _, tc := range tests {
		out, err := s.Append(ctx, c.Session.Id, tc.msgs, fence.Guard{})
		if !errs.HasReason(err, errs.ReasonClientIDReused) {
			t.Errorf("%s: got %d messages, %v; want CLIENT_ID_REUSED", tc.name, len(out), err)
		} else if e, _ := errs.As(err); e.Kind != errs.KindAlreadyExists || e.Metadata["client_id"] != tc.msgs[len(tc.msgs)-1].ClientId {
			t.Errorf("%s: kind %v, metadata %v; want AlreadyExists naming the client id", tc.name, e.Kind, e.Metadata)
		}
	}
	msgs := readAll(t, s, c.Session.Id)
	if len(msgs) != 2 || msgs[0].Text != "the original" || msgs[1].ToolResult.Output != large.ToolResult.Output {
		t.Fatalf("stored transcript changed: %d messages", len(msgs))
	}
}

// An owner append refused NOT_OWNER never touches a committed message, not
// before its chunks are written (the precheck) nor after (the owner changed
// while they were being written).
func TestRefusedOwnerAppendLeavesCommittedChunks(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	out, cid := bigText(1<<20), ids.NewClientID()
	old := fence.Guard{Node: "n1", Token: c.Token}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(cid, out)}, old); err != nil {
		t.Fatal(err)
	}
	// The owner changes while a second append's chunks are being written.
	store.SetAfterChunks(s, func() {
		store.SetAfterChunks(s, nil)
		handover(t, s, c.Session.Id, "n1", c.Token, "n2")
	})
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(ids.NewClientID(), bigText(700<<10))}, old); !errs.HasReason(err, errs.ReasonNotOwner) {
		t.Fatalf("append across a handover: %v, want NOT_OWNER", err)
	}
	// The stale owner retries the committed message: refused, untouched.
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(cid, out)}, old); !errs.HasReason(err, errs.ReasonNotOwner) {
		t.Fatalf("stale retry: %v, want NOT_OWNER", err)
	}
	msgs := readAll(t, s, c.Session.Id)
	if len(msgs) != 2 || msgs[0].ToolResult.GetOutput() != out || msgs[1].NoticeType != "migration" {
		t.Fatalf("transcript after refused owner appends: %d messages", len(msgs))
	}
}

// Appends to a missing session, or with a message too large later in the
// call, are refused before any chunk is written.
func TestRefusedAppendsWriteNoChunks(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	for range 3 {
		if _, err := s.Append(ctx, "nosuchsession", []*castv1.Message{toolResult(ids.NewClientID(), bigText(2<<20))}, fence.Guard{}); !errs.HasReason(err, errs.ReasonNotFound) {
			t.Fatalf("append to a missing session: %v", err)
		}
	}
	huge := userMsg(strings.Repeat("x", store.DefaultMaxMessageBytes+1))
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{toolResult(ids.NewClientID(), bigText(2<<20)), huge}, fence.Guard{}); !errs.HasReason(err, errs.ReasonMessageTooLarge) {
		t.Fatalf("oversize later in a call: %v", err)
	}
	if n := chunkKeys(t, cli); n != 0 {
		t.Fatalf("refused appends left %d chunk keys", n)
	}
}

// Chunk bytes count against the quota: 7 MiB appends are refused by the
// store before etcd's quota is reached, and etcd never raises NOSPACE.
func TestLargeAppendsNeverReachNoSpace(t *testing.T) {
	cases := []struct {
		name    string
		quota   int64
		missing bool
		appends int
	}{
		{"missing session", 128 << 20, true, 19},
		{"existing session", 20 << 20, false, 19},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.QuotaBytes = tc.quota })
			s := testharness.OpenStore(t, ep, func(c *store.Config) { c.QuotaBytes = tc.quota })
			cli := etcdClient(t, ep)
			ctx := ctxT(t)
			sid, want := "nosuchsession", errs.ReasonNotFound
			if !tc.missing {
				sid, want = newSession(t, s, "n1").Session.Id, errs.ReasonStoreQuota
			}
			text := bigText(7 << 20)
			var err error
			kept := 0
			for i := range tc.appends {
				_, err = s.Append(ctx, sid, []*castv1.Message{toolResult(ids.NewClientID(), text)}, fence.Guard{})
				if err == nil {
					kept++
					continue
				}
				if !errs.HasReason(err, want) {
					t.Fatalf("append %d (%d kept): %v, want %s", i, kept, err, want)
				}
				if !tc.missing {
					break
				}
			}
			if err == nil {
				t.Fatalf("%d appends of 7 MiB all accepted under a %d MiB quota", kept, tc.quota>>20)
			}
			alarms, aerr := cli.AlarmList(ctx)
			if aerr != nil || len(alarms.Alarms) != 0 {
				t.Fatalf("etcd alarms: %v %v", alarms, aerr)
			}
			if _, err := cli.Put(ctx, "/probe", "still writable"); err != nil {
				t.Fatalf("etcd refuses a small write: %v", err)
			}
		})
	}
}

var _ = context.Background

// Work tree bundle chunks count against the quota like message chunks.
func TestWorkTreeChunksCountAgainstQuota(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	probe := testharness.OpenStore(t, ep, nil)
	used, _ := probe.Usage()
	s := testharness.OpenStore(t, ep, func(c *store.Config) { c.QuotaBytes = used + 2<<20; c.QuotaReserve = 0 })
	ctx := ctxT(t)
	chunk := []byte(bigText(256 << 10))
	var err error
	put := 0
	for ; put < 20 && err == nil; put++ {
		err = s.PutWorkTreeChunk(ctx, "m1", "sess1", put, chunk)
	}
	if !errs.HasReason(err, errs.ReasonStoreQuota) || put < 4 {
		t.Fatalf("after %d chunks of 256 KiB under 2 MiB of headroom: %v, want STORE_QUOTA_EXCEEDED", put, err)
	}
}
