package controlplane_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// Streams on several sessions over two connections each get every
// message of their session once, in order; one stream whose client does
// not read (on a connection of its own with a fixed 64 KiB window, so the
// server's sends block) falls behind without holding the others up, and
// once read gets every message once, in order, too.
func TestWatchStreamsFanOutAndASlowOneCatchesUp(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.Watch.Buffer = 8 })
	conns := []*client.Client{testharness.Dial(t, srv.Addr()), testharness.Dial(t, srv.Addr())}
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, conns[0], "n1", true)
	ctx := ctxFor(t, 5*time.Minute)
	const sessions, perSession, n = 3, 8, 80
	var sids []string
	for range sessions {
		s, err := conns[0].Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.Id)
	}
	type stream struct {
		sid string
		w   castv1.SessionService_WatchSessionClient
	}
	var streams []stream
	for i := range perSession {
		for _, sid := range sids {
			streams = append(streams, stream{sid, openSeqWatch(ctx, t, conns[i%2].Sessions, sid)})
		}
	}
	slow := openSeqWatch(ctx, t, slowClient(t, srv.Addr()), sids[0])

	text := strings.Repeat("y", 8<<10) // 80 of them pass the slow stream's window many times over
	done := make(chan error, 1)
	go func() {
		for i := range n {
			for _, sid := range sids {
				if _, err := conns[0].Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sid, Messages: []*castv1.Message{
					{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: fmt.Sprint(i, text)}}}); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	read := make(chan error, len(streams))
	for i, s := range streams {
		go func() { read <- seqsErr(fmt.Sprintf("stream %d of %s", i, s.sid), s.w, n) }()
	}
	for range streams {
		if err := <-read; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Every stream read got everything while one was never read: the feed
	// did not wait for it. It fell behind (so the counter moved).
	if counterValue(t, srv, "cast_controlplane_watch_fell_behind_total") < 1 {
		t.Fatal("no watch fell behind although one was not read")
	}
	if err := seqsErr("the stream that did not read", slow, n); err != nil {
		t.Fatal(err)
	}
}

// openSeqWatch opens a watch of sid from seq 1 and waits for its first event
// (the session): the stream is open.
func openSeqWatch(ctx context.Context, t *testing.T, c castv1.SessionServiceClient, sid string) castv1.SessionService_WatchSessionClient {
	t.Helper()
	w, err := c.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: sid, StartSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || ev.GetSession() == nil {
		t.Fatalf("watch of %s: first event %v, %v; want the session", sid, ev, err)
	}
	return w
}

// seqsErr reads w until it has seqs 1..n; any other order is an error.
func seqsErr(what string, w castv1.SessionService_WatchSessionClient, n int64) error {
	for next := int64(1); next <= n; {
		ev, err := w.Recv()
		if err != nil {
			return fmt.Errorf("%s: %w after %d messages", what, err, next-1)
		}
		if m := ev.GetMessage(); m != nil {
			if m.Seq != next {
				return fmt.Errorf("%s: got seq %d, want %d", what, m.Seq, next)
			}
			next++
		}
	}
	return nil
}

// counterValue is the value of an unlabeled metric on srv's /metrics.
func counterValue(t *testing.T, srv *controlplane.Server, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(httpGet(t, "http://"+srv.MetricsAddr()+"/metrics")), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s on /metrics", name)
	return 0
}

// slowClient is an admin's session client on a connection of its own
// whose flow-control windows stay at 64 KiB (a fixed window turns off
// gRPC's window growth), so a stream it does not read stalls the
// server's sends.
func slowClient(t *testing.T, addr string) castv1.SessionServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(client.NewToken(testharness.AdminToken())),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return castv1.NewSessionServiceClient(cc)
}

// The per-principal watch cap holds admins too: an admin's stream past it
// is refused with RESOURCE_EXHAUSTED (TOO_MANY_STREAMS) while a user's
// streams open, and a closed stream makes room again.
func TestWatchCapPerPrincipal(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, func(c *controlplane.Config) { c.Watch.MaxPerPrincipal = 2 })
	ctx := ctxT(t)
	first, closeFirst := context.WithCancel(ctx)
	defer closeFirst()
	openSeqWatch(first, t, e.admin.Sessions, e.aliceSess.Id)
	openSeqWatch(ctx, t, e.admin.Sessions, e.aliceSess.Id)
	wantDenied(t, "the admin's third watch", watchErr(ctx, e.admin, e.aliceSess.Id), codes.ResourceExhausted, authz.ReasonTooManyStreams)
	openSeqWatch(ctx, t, e.alice.Sessions, e.aliceSess.Id)
	openSeqWatch(ctx, t, e.alice.Sessions, e.aliceSess.Id)
	wantDenied(t, "alice's third watch", watchErr(ctx, e.alice, e.aliceSess.Id), codes.ResourceExhausted, authz.ReasonTooManyStreams)
	closeFirst()
	testharness.WaitFor(t, 30*time.Second, "room for the admin's watch once one closed", func() bool {
		return watchErr(ctx, e.admin, e.aliceSess.Id) == nil
	})
}

// watchErr opens a watch of sid and returns why it failed before its
// first event (nil: it opened; it is closed again).
func watchErr(ctx context.Context, c *client.Client, sid string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: sid})
	if err == nil {
		_, err = w.Recv()
	}
	return err
}

// A replica that stops ends its open watches with UNAVAILABLE (watch again
// from the next seq) rather than holding its graceful stop: the fan-out
// ends them, the streams having no shutdown context of their own. The
// graceful stop's deadline (5 minutes) is past the test's 90 s, so a
// watch left open fails this, and the failed test's cleanup still ends.
func TestWatchEndsUnavailableWhenTheReplicaStops(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.Shutdown = 5 * time.Minute })
	c := testharness.Dial(t, srv.Addr())
	stopNode := testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, c, "n1", true)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	stopNode() // its stream reconnecting would not hold the stop, but keep the test to the watches
	watches := []castv1.SessionService_WatchSessionClient{
		openSeqWatch(ctx, t, c.Sessions, sess.Id),
		openSeqWatch(ctx, t, c.Sessions, sess.Id),
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); srv.Stop() }()
	for i, w := range watches {
		var err error
		for err == nil {
			_, err = w.Recv()
		}
		wantDenied(t, fmt.Sprintf("watch %d at the stop", i), err, codes.Unavailable, errs.ReasonUnavailable)
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the replica's stop still waits on its watches")
	}
}
