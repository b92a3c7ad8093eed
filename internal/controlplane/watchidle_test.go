package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// etcd's simple auth token lapses after --auth-token-ttl seconds unused,
// and clientv3 authenticates its shared watch stream only when it opens
// it: once no watch was created on that stream for a TTL, etcd refuses
// every new watch on it ("invalid auth token") while the old ones run on.
// The control plane's watches re-open on a fresh stream, so after an idle
// spell longer than the TTL WatchSession and RequestPermission work and
// see what is appended after.
func TestWatchesWorkAfterTheEtcdTokenLapses(t *testing.T) {
	const ttl = 2
	etcd, access := testharness.StartTokenTTLEtcd(t, ttl)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir, c.Etcd = []string{etcd.URL}, "", access
	})
	watchesWorkAfterIdle(t, srv, (ttl+2)*time.Second)
}

// watchesWorkAfterIdle makes a session on a new node, watches it once,
// leaves the control plane idle for idle, then checks that a new
// WatchSession sees a message sent after it opened and that a
// RequestPermission waits for its answer and returns it.
func watchesWorkAfterIdle(t *testing.T, srv *controlplane.Server, idle time.Duration) {
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, c, "n1", true)
	ctx := ctxFor(t, idle+2*time.Minute)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	watchSeesNextMessage(ctx, t, c, sess.Id, "before the idle spell")

	// The idle spell is what the test is about: nothing waits on an event
	// here, the token has to lapse on etcd's clock.
	time.Sleep(idle)

	start := time.Now()
	watchSeesNextMessage(ctx, t, c, sess.Id, "after the idle spell")
	permissionWaitsForItsAnswer(ctx, t, c, sess.Id)
	t.Logf("after %v idle: watch and permission worked in %v", idle, time.Since(start))
}

// watchSeesNextMessage opens a WatchSession from the next seq, appends text
// and waits for the watch to deliver it.
func watchSeesNextMessage(ctx context.Context, t *testing.T, c *client.Client, sessionID, text string) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cur, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sessionID})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Sessions.WatchSession(wctx, &castv1.WatchSessionRequest{SessionId: sessionID, StartSeq: cur.LastSeq + 1})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || ev.GetSession() == nil {
		t.Fatalf("watch opened %s: first event %v, %v; want the session", text, ev, err)
	}
	// Not a user message: no turn runs (and fails, on a node without
	// agents) to change the session's state under the permission check.
	if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sessionID, Messages: []*castv1.Message{
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: text}}}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("watch opened %s ended before the message sent after it: %v", text, err)
		}
		if ev.GetMessage().GetText() == text {
			return
		}
	}
}

// permissionWaitsForItsAnswer asks for a permission, answers it once the
// session waits on it, and checks the asker got that answer.
func permissionWaitsForItsAnswer(ctx context.Context, t *testing.T, c *client.Client, sessionID string) {
	t.Helper()
	type result struct {
		resp *castv1.RequestPermissionResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := c.Sessions.RequestPermission(ctx, &castv1.RequestPermissionRequest{SessionId: sessionID,
			RequestId: ids.NewClientID(), ToolName: "Bash", Input: `{"command":"ls"}`})
		got <- result{resp, err}
	}()
	testharness.WaitFor(t, 30*time.Second, "the session waiting on the permission", func() bool {
		select {
		case r := <-got:
			t.Fatalf("RequestPermission returned before anyone answered: %v, %v", r.resp, r.err)
		default:
		}
		s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sessionID})
		return err == nil && s.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION
	})
	if _, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sessionID, Allow: true, Message: "go on"}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || !r.resp.Allow || r.resp.Message != "go on" {
		t.Fatalf("RequestPermission = %v, %v; want the answer (allow, go on)", r.resp, r.err)
	}
}
