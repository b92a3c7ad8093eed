package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// nodeStream speaks the node side of Connect over real gRPC, so a test can
// count every frame the control plane sends and pace its reads.
type nodeStream struct {
	t      *testing.T
	stream castv1.NodeService_ConnectClient
	cancel context.CancelFunc
	hbDone chan struct{}
}

// connectNode opens a Connect stream for name, says hello with owned, and
// heartbeats every 300ms (well within the test lease) until closed.
func connectNode(t *testing.T, ctx context.Context, c *client.Client, name string, owned []string) *nodeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.Nodes.Connect(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	// It says it has claude and codex, so sessions of either are placed on it.
	hello := &castv1.Hello{Node: &castv1.Node{Name: name, Agents: []*castv1.AgentInstall{{Name: "claude"}, {Name: "codex"}}}, OwnedSessions: owned}
	if err := stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}); err != nil {
		cancel()
		t.Fatal(err)
	}
	n := &nodeStream{t: t, stream: stream, cancel: cancel, hbDone: make(chan struct{})}
	go func() {
		defer close(n.hbDone)
		testharness.Heartbeats(ctx, stream)
	}()
	t.Cleanup(n.close)
	return n
}

func (n *nodeStream) close() {
	n.cancel()
	<-n.hbDone
}

// createOwned creates n sessions owned by node, 32 at a time.
func createOwned(t testing.TB, ctx context.Context, st *store.Store, node string, n int) []string {
	t.Helper()
	out := make([]string, n)
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				c, err := st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Title: fmt.Sprint("s", i), Node: node})
				if err != nil {
					errc <- err
					return
				}
				out[i] = c.Session.Id
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatalf("create sessions: %v", err)
	}
	return out
}

// ownedByBig starts an etcd holding n sessions owned by the node "big",
// which is registered no longer, and returns its endpoint and the
// sessions. They are made through the store before any control plane
// starts (creating needs the owner registered), so its dispatcher has no
// backlog of creations to work through during a resync.
func ownedByBig(tb testing.TB, ctx context.Context, n int) (string, []string) {
	tb.Helper()
	ep := testharness.StartEtcd(tb, nil)
	st := testharness.OpenStore(tb, ep, nil)
	lease, err := st.RegisterNode(ctx, &castv1.Node{Name: "big"}, "test", time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	owned := createOwned(tb, ctx, st, "big", n)
	if err := st.UnregisterNode(ctx, lease); err != nil {
		tb.Fatal(err)
	}
	return ep, owned
}

// resyncSessions is how many sessions TestResyncOfTenThousandSessionsStreams
// gives one node: 2,000 by default (past the old 1,024-frame cut, about
// 10 s under -race), 10,000 in the long mode (CAST_LOAD=long, `make
// load`), which takes 40-60 s under -race and would crowd a 2-core CI
// machine running other packages beside it.
func resyncSessions() int {
	if os.Getenv("CAST_LOAD") == "long" {
		return 10000
	}
	return 2000
}

// A node owning 10,000 sessions (2,000 by default: resyncSessions)
// reconnects with a hello that lists them and as many more it lost: it
// gets one AssignSession per owned session and one ReleaseSession per lost
// one, and the stream stays up (heartbeats are still answered). Before
// resync streamed, the pre-queued resync overflowed the 1,024-frame queue
// and cut the stream on every reconnect.
func TestResyncOfTenThousandSessionsStreams(t *testing.T) {
	n := resyncSessions()
	// The deadline scales with the work: about 6 ms per session for
	// creation and resync together under -race on an idle machine, so
	// 50 ms each (plus a minute) leaves room for a loaded one.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(n)*50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	ep, owned := ownedByBig(t, ctx, n)
	t.Logf("created %d sessions in %s", n, time.Since(t0))
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.NodeQueue = 16 // the resync must not depend on the live queue's size
	})
	c := testharness.Dial(t, srv.Addr())

	lost := make([]string, n)
	for i := range lost {
		lost[i] = ids.NewSessionID() + "x" // never created
	}
	start := time.Now()
	node := connectNode(t, ctx, c, "big", append(append([]string{}, owned...), lost...))
	assigned, released := map[string]bool{}, map[string]bool{}
	for len(assigned) < n || len(released) < n {
		f, err := node.stream.Recv()
		if err != nil {
			t.Fatalf("stream ended after %d assignments and %d releases: %v", len(assigned), len(released), err)
		}
		switch k := f.GetCommand().GetKind().(type) {
		case *castv1.Command_AssignSession:
			assigned[k.AssignSession.Session.Id] = true
		case *castv1.Command_ReleaseSession:
			released[k.ReleaseSession.SessionId] = true
		}
	}
	t.Logf("resync of %d owned and %d lost sessions took %s", n, n, time.Since(start))
	for _, id := range owned {
		if !assigned[id] {
			t.Fatalf("session %s was not assigned", id)
		}
	}
	for _, id := range lost {
		if !released[id] {
			t.Fatalf("session %s was not released", id)
		}
	}
	// Still up: heartbeats go on being answered on this same stream.
	for acks := 0; acks < 2; {
		f, err := node.stream.Recv()
		if err != nil {
			t.Fatalf("stream ended after the resync: %v", err)
		}
		if f.GetHeartbeatAck() != nil {
			acks++
		}
	}
	waitConnected(t, c, "big", true)
}

// A peer that stops reading is still cut once its live queue fills (and
// only then): the stream ends and the node is shown down, so it can
// reconnect and catch up instead of holding frames forever.
func TestStuckNodeStreamIsCut(t *testing.T) {
	t.Parallel()
	const queue = 16
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.NodeQueue = queue })
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	connectNode(t, ctx, c, "stuck", nil) // heartbeats, never reads
	waitConnected(t, c, "stuck", true)
	// Named: without a node, placement would ask it (it never answers)
	// whether it has /tmp.
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 16<<10)
	connected := func() bool {
		resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Nodes) == 1 && resp.Nodes[0].Connected
	}
	// Each message is one live frame; flow control and the queue hold a
	// few dozen of them.
	sent := 0
	for connected() {
		if sent >= 50*queue {
			t.Fatal("a node that reads nothing was never cut")
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: text}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		sent += 8 * 4
	}
	t.Logf("cut after %d messages", sent)
}

// A node that names in its hello sessions it does not own learns only
// that they are not its own: a ReleaseSession without the owner. Only the
// source of a migration that moved one is told where it went (it knows:
// the export named the target; its checkout is cleaned once it hears).
// Any node could list a session id it had learnt and be told which node
// holds the session.
func TestResyncTellsTheOwnerOnlyToAMigrationsSource(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	go answerImports(c, commandsOf(connectNode(t, ctx, c, "a", nil)), "a")
	src := connectNode(t, ctx, c, "b", nil)
	waitConnected(t, c, "a", true)
	waitConnected(t, c, "b", true)
	// moved came to a from b by a migration; other was a's from the start.
	s, m := startMove(ctx, t, c, "claude", "b", "", "a")
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v: %s", m.State, m.Sessions[0].Reason)
	}
	moved := s.Id
	o, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	other := o.Id
	src.close()
	waitConnected(t, c, "b", false)

	b := connectNode(t, ctx, c, "b", []string{moved, other})
	owners := map[string]string{}
	for len(owners) < 2 {
		f, err := b.stream.Recv()
		if err != nil {
			t.Fatalf("stream ended after releases %v: %v", owners, err)
		}
		if r := f.GetCommand().GetReleaseSession(); r != nil {
			owners[r.SessionId] = r.Owner
		}
	}
	if owners[moved] != "a" {
		t.Errorf("the migration's source was told session %s moved to %q, want a", moved, owners[moved])
	}
	if owners[other] != "" {
		t.Errorf("a node claiming a session it never had was told its owner %q", owners[other])
	}
}
