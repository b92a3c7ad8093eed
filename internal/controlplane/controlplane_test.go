package controlplane_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/objstore/s3test"
	"github.com/cast-dev/cast/internal/testharness"
)

func TestMain(m *testing.M) {
	s3test.RunIfAsked() // the S3 server process of TestAdoptedHistoryBeyondEtcd is this binary
	goleak.VerifyTestMain(m, append(testharness.LeakOptions(), goleak.Cleanup(func(code int) {
		testharness.RemoveBinaries() // the benchmarks' control plane processes
		os.Exit(code)
	}))...)
}

func ctxT(t *testing.T) context.Context { return ctxFor(t, 90*time.Second) }

// ctxFor is a test context that ends after d. A test making a thousand
// round trips gets minutes: d bounds it, and is no pace it must keep on a
// loaded machine.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// setup starts a control plane and one in-process node, and waits until
// the node is connected.
func setup(t *testing.T) (*client.Client, string) {
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, c, "n1", true)
	return c, srv.Addr()
}

func waitConnected(t *testing.T, c *client.Client, name string, want bool) {
	t.Helper()
	testharness.WaitConnected(t, c, name, want)
}

func TestAppendReadExportWatch(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxFor(t, 5*time.Minute) // 119 sends: a bound, not a pace on a loaded machine
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Node != "n1" || sess.LastSeq != 1 || sess.Title != "first" {
		t.Fatalf("created %v", sess)
	}
	watch, err := c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: sess.Id, StartSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The first messages are sends, as `cast send` makes them (one round
	// trip and one etcd txn each); the rest, enough for three export pages
	// of store.ExportPageSize, are appended in batches as an importer does:
	// a thousand sends would cost the race-run minutes for nothing the
	// watch, the export or the range read checks.
	const sends, n, batch = 120, 1100, 100
	for i := 2; i <= sends; i++ {
		if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: fmt.Sprint("m", i), RequestId: ids.NewClientID()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := sends + 1; i <= n; i += batch {
		var msgs []*castv1.Message
		for j := i; j < i+batch && j <= n; j++ {
			msgs = append(msgs, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: fmt.Sprint("m", j)})
		}
		if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	// Watch: the session first, then every message in order, no gaps.
	next := int64(1)
	for next <= n {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m := ev.GetMessage(); m != nil {
			if m.Seq != next {
				t.Fatalf("watch seq %d, want %d", m.Seq, next)
			}
			next++
		}
	}
	// Export: pages of 500, one revision.
	stream, err := c.Sessions.ExportSession(ctx, &castv1.ExportSessionRequest{SessionId: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	var pages []int
	for {
		p, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(pages) == 0 && p.Session.GetId() != sess.Id {
			t.Fatal("first export page lacks the session")
		}
		pages = append(pages, len(p.Messages))
	}
	if fmt.Sprint(pages) != "[500 500 100]" {
		t.Fatalf("export pages %v", pages)
	}
	// Range read as `cast read ID 87:106` does.
	resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, StartSeq: 87, EndSeq: 106})
	if err != nil || len(resp.Messages) != 20 || resp.Messages[0].Text != "m87" {
		t.Fatalf("range read: %v %v", len(resp.GetMessages()), err)
	}
	list, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].LastSeq != n {
		t.Fatalf("list: %v %v", list, err)
	}
}

func TestSendIsIdempotentOnRequestID(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", RequestId: "create-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", RequestId: "create-1"})
	if err != nil || again.Id != sess.Id {
		t.Fatalf("retried create made %v (%v), want %s", again.GetId(), err, sess.Id)
	}
	req := &castv1.SendMessageRequest{SessionId: sess.Id, Text: "once", RequestId: ids.NewClientID()}
	a, err := c.Sessions.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Sessions.SendMessage(ctx, req)
	if err != nil || b.Message.Seq != a.Message.Seq {
		t.Fatalf("retry got %v (%v), want seq %d", b, err, a.Message.Seq)
	}
	got, _ := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if got.LastSeq != 1 {
		t.Fatalf("last_seq %d after a retried send", got.LastSeq)
	}
}

func TestBadInputGetsReasons(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	asst := []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "x"}}
	tests := []struct {
		name   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"unknown session", func() error {
			_, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: "zzzzzzz"})
			return err
		}, codes.NotFound, "NOT_FOUND"},
		{"malformed id", func() error {
			_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: "../etc", Text: "x"})
			return err
		}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"empty message", func() error {
			_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: ""})
			return err
		}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"oversize message", func() error {
			_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: strings.Repeat("x", 9<<20)})
			return err
		}, codes.ResourceExhausted, "MESSAGE_TOO_LARGE"},
		{"unknown agent", func() error {
			_, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "eliza"})
			return err
		}, codes.InvalidArgument, "UNKNOWN_AGENT"},
		// Quoted in the message cut by bytes, inside a character: the
		// status could not be encoded with its details, and the reason was lost.
		{"long unknown agent", func() error {
			_, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "x" + strings.Repeat("é", 60)})
			return err
		}, codes.InvalidArgument, "UNKNOWN_AGENT"},
		{"a parent's call without the parent", func() error {
			_, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", ParentCallId: "toolu_1"})
			return err
		}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"node not connected", func() error {
			_, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "ghost"})
			return err
		}, codes.NotFound, "NOT_FOUND"},
		{"stale owner token", func() error {
			_, err := c.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sess.Id, Node: owner.Node, OwnerToken: 1, Messages: asst})
			return err
		}, codes.FailedPrecondition, "NOT_OWNER"},
		{"bad page token", func() error {
			_, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{PageToken: "nope"})
			return err
		}, codes.InvalidArgument, "INVALID_PAGE_TOKEN"},
		// A request id in the form of the ids nodes give rows they synced or
		// adopted would be read as history: the message would never run.
		{"a synced row's request id", func() error {
			_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "x", RequestId: "n.abc"})
			return err
		}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"an adopted row's request id", func() error {
			_, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Text: "x", RequestId: "adopt.abc"})
			return err
		}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"inverted range", func() error {
			_, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, StartSeq: 9, EndSeq: 3})
			return err
		}, codes.InvalidArgument, "INVALID_ARGUMENT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != tc.code || client.ReasonOf(err) != tc.reason {
				t.Fatalf("got %v (reason %q), want %v %s", err, client.ReasonOf(err), tc.code, tc.reason)
			}
		})
	}
	got, _ := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if got.LastSeq != 0 {
		t.Fatalf("refused requests stored %d messages", got.LastSeq)
	}
}

// A node whose heartbeats stop is marked down when its lease lapses, even
// though its stream is still open; when it heartbeats again it is back.
func TestSilentNodeIsMarkedDownByLease(t *testing.T) {
	srv := testharness.StartControlPlane(t, testharness.ShortLease)
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	stream, err := c.Nodes.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello := &castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: &castv1.Hello{Node: &castv1.Node{Name: "sleepy", Labels: []string{"laptop"}}}}}
	if err := stream.Send(hello); err != nil {
		t.Fatal(err)
	}
	if f, err := stream.Recv(); err != nil || f.GetWelcome() == nil {
		t.Fatalf("welcome: %v %v", f, err)
	}
	waitConnected(t, c, "sleepy", true)
	start := time.Now()
	waitConnected(t, c, "sleepy", false)
	if d := time.Since(start); d < time.Second {
		t.Fatalf("marked down after %s, before the 2s lease could lapse", d)
	}
	hb := &castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Heartbeat{Heartbeat: &castv1.Heartbeat{Seq: 1}}}
	if err := stream.Send(hb); err != nil {
		t.Fatal(err)
	}
	waitConnected(t, c, "sleepy", true)
	stream.CloseSend()
}

// A node's heartbeat reaching a replica that cannot reach etcd (a
// partition: nothing answers, nothing resets) ends the node's stream
// UNAVAILABLE within the store's bound, so the node connects again,
// to a replica that can. Before, the lease renewal waited on etcd as long
// as it was away and the node's stream hung on this replica.
func TestHeartbeatWithEtcdUnreachableEndsTheStream(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	proxy := testharness.StartProxy(t, strings.TrimPrefix(ep, "http://"))
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{"http://" + proxy.Addr}, ""
	})
	t.Cleanup(proxy.Heal) // before the control plane stops
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	stream, err := c.Nodes.Connect(ctx)
	must(t, err)
	hello := &castv1.Hello{Node: &castv1.Node{Name: "cut", Agents: []*castv1.AgentInstall{{Name: "claude"}}}}
	must(t, stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}))
	heartbeat := func(seq int64) {
		t.Helper()
		must(t, stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Heartbeat{Heartbeat: &castv1.Heartbeat{Seq: seq}}}))
	}
	heartbeat(1) // answered while etcd is reachable: the credential is checked and cached
	for {
		f, err := stream.Recv()
		must(t, err)
		if f.GetHeartbeatAck().GetSeq() == 1 {
			break
		}
	}
	proxy.Blackhole(testharness.Both)
	heartbeat(2)
	endsUnavailable(t, stream)
}

// endsUnavailable waits for a node's stream to a replica cut from etcd to
// end UNAVAILABLE, within four times the store's 5 s bound.
func endsUnavailable(t *testing.T, stream castv1.NodeService_ConnectClient) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-drain(func() error { _, err := stream.Recv(); return err }):
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the stream ended %v after %s, want UNAVAILABLE", err, time.Since(start))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the node's stream still hangs on a replica that cannot reach etcd")
	}
}

// A node's hello, and its NodeInfo on a live stream, reaching a replica
// that cannot reach etcd end the stream UNAVAILABLE within the store's
// bound, as a heartbeat does, so the node connects again to a replica that
// can. Before, registering the node (or storing its agents) waited on
// etcd as long as it was away and the stream hung on this replica.
func TestNodeStreamWithEtcdUnreachableEnds(t *testing.T) {
	hello := &castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: &castv1.Hello{
		Node: &castv1.Node{Name: "cut", Agents: []*castv1.AgentInstall{{Name: "claude"}}}}}}
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, c *client.Client, proxy *testharness.Proxy) castv1.NodeService_ConnectClient
	}{
		{"hello", func(t *testing.T, c *client.Client, proxy *testharness.Proxy) castv1.NodeService_ConnectClient {
			first, err := c.Nodes.Connect(ctxT(t)) // the credential is checked and cached
			must(t, err)
			must(t, first.Send(hello))
			if _, err := first.Recv(); err != nil {
				t.Fatal(err)
			}
			proxy.Blackhole(testharness.Both)
			stream, err := c.Nodes.Connect(ctxT(t))
			must(t, err)
			must(t, stream.Send(hello))
			return stream
		}},
		{"node info", func(t *testing.T, c *client.Client, proxy *testharness.Proxy) castv1.NodeService_ConnectClient {
			stream, err := c.Nodes.Connect(ctxT(t))
			must(t, err)
			must(t, stream.Send(hello))
			if _, err := stream.Recv(); err != nil {
				t.Fatal(err)
			}
			proxy.Blackhole(testharness.Both)
			must(t, stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_NodeInfo{NodeInfo: &castv1.NodeInfo{
				Agents: []*castv1.AgentInstall{{Name: "claude", Version: "2"}}}}}))
			return stream
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := testharness.StartEtcd(t, nil)
			proxy := testharness.StartProxy(t, strings.TrimPrefix(ep, "http://"))
			srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
				c.EtcdEndpoints, c.DataDir = []string{"http://" + proxy.Addr}, ""
			})
			t.Cleanup(proxy.Heal) // before the control plane stops
			endsUnavailable(t, tc.cut(t, testharness.Dial(t, srv.Addr()), proxy))
		})
	}
}

// A create with validate_only is checked and placed as a create would be
// and stores nothing: the answer names the node and folder, and a
// refusal is the create's own.
func TestCreateValidateOnlyStoresNothing(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	placed, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: dir, Hidden: true, Text: "hi", ValidateOnly: true})
	if err != nil || placed.Node != "n1" || placed.Cwd != dir || placed.Id != "" {
		t.Fatalf("validate_only create = %v, %v; want node n1, cwd %s, no id", placed, err, dir)
	}
	_, err = c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: dir, Text: "hi", Node: "nowhere", ValidateOnly: true})
	if status.Code(err) == codes.OK {
		t.Fatal("validate_only on a node that does not exist was accepted")
	}
	list, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{IncludeSubagents: true, IncludeArchived: true})
	if err != nil || len(list.Sessions) != 0 {
		t.Fatalf("sessions after validate_only creates: %v, %v; want none", list.GetSessions(), err)
	}
}

// An archived session takes no new messages (`cast rm`: "no new
// messages"), by any call that adds them: a send, and an append (an
// importer's call, which takes user messages too, and those the owner
// node is handed to run). AppendMessages used to store them.
func TestArchivedSessionTakesNoMessages(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: sess.Id}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"send", func() error {
			_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "more", RequestId: ids.NewClientID()})
			return err
		}},
		{"append a user message", func() error {
			_, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
				{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "more"}}})
			return err
		}},
		{"append an assistant message", func() error {
			_, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
				{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "an answer"}}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != "SESSION_ARCHIVED" {
				t.Fatalf("got %v (reason %q), want FAILED_PRECONDITION SESSION_ARCHIVED", err, client.ReasonOf(err))
			}
		})
	}
	got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil || got.LastSeq != 0 {
		t.Fatalf("the archived session holds %d messages (%v), want none", got.GetLastSeq(), err)
	}
}

// A malformed page_size or page_token is the caller's INVALID_ARGUMENT
// before the listing is read: before, the listings read whole (nodes,
// tokens, accounts, agent checks) read the store first, so a replica cut
// from etcd answered a call that can never work UNAVAILABLE, retry. The
// store's list_nodes count says whether ListNodes read.
func TestPageArgsRefusedBeforeTheRead(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	reads := func() float64 { return storeCalls(t, srv.MetricsAddr(), "list_nodes") }
	if _, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{}); err != nil {
		t.Fatal(err)
	}
	// The replica lists the nodes on its own too (the node gauges every 5 s,
	// liveness every lease), and those reads count under the same op: a
	// look that one of them landed in is taken again. A refusal that read
	// the store would show in every look, so one clean look of the five
	// is the proof, and five looks of a second or so each cannot all meet
	// a read every 5 s.
	var n float64
	for range 5 {
		before := reads()
		for _, req := range []*castv1.ListNodesRequest{{PageSize: -1}, {PageToken: "a+b"}} {
			if _, err := c.Nodes.ListNodes(ctx, req); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%v: %v, want INVALID_ARGUMENT", req, err)
			}
		}
		if n = reads() - before; n == 0 {
			return
		}
	}
	t.Fatalf("refused ListNodes calls read the store (%v times in the last of five looks)", n)
}
