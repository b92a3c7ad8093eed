package controlplane_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/testharness"
)

// twoReplicas starts two control planes over one external etcd (the
// --etcd-endpoints path) and a client of each.
func twoReplicas(t *testing.T) (a, b *controlplane.Server, ca, cb *client.Client) {
	ep := testharness.StartEtcd(t, nil)
	external := func(c *controlplane.Config) { c.EtcdEndpoints = []string{ep}; c.DataDir = "" }
	a = testharness.StartControlPlane(t, external)
	b = testharness.StartControlPlane(t, external)
	return a, b, testharness.Dial(t, a.Addr()), testharness.Dial(t, b.Addr())
}

// nodeOnReplicaA starts two replicas and node n1 connected to the first,
// with its data in dir, and waits until the second sees it connected.
func nodeOnReplicaA(t *testing.T) (ca, cb *client.Client, dir string) {
	t.Helper()
	a, _, ca, cb := twoReplicas(t)
	dir = filepath.Join(t.TempDir(), "node")
	testharness.StartNode(t, a.Addr(), "n1", func(c *node.Config) { c.DataDir = dir })
	waitConnected(t, cb, "n1", true)
	return ca, cb, dir
}

// nodeSessions is the sessions of the node's state file in dir, each
// record as stored (none before the node wrote it).
func nodeSessions(t *testing.T, dir string) map[string]json.RawMessage {
	t.Helper()
	b, err := statefile.Read(filepath.Join(dir, "state.json"), "sessions")
	if err != nil || len(b) == 0 { // not written yet
		return nil
	}
	var st struct {
		Sessions map[string]json.RawMessage `json:"sessions"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Sessions
}

// Two replicas share one external etcd (the --etcd-endpoints path). A node
// connected to replica A is assigned and delivered work created through
// replica B, and appends through both stay dense.
func TestReplicasShareExternalEtcd(t *testing.T) {
	t.Parallel()
	ca, cb, dir := nodeOnReplicaA(t)
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
		var o struct {
			ReceivedSeq int64 `json:"received_seq"`
		}
		rec, ok := nodeSessions(t, dir)[sess.Id]
		return ok && json.Unmarshal(rec, &o) == nil && o.ReceivedSeq == total
	})
}

// A purge on another replica than the one holding the owner's stream
// reaches the owner: the release was sent only to streams on the replica
// that took the purge, so the node kept the purged session until it
// reconnected.
func TestPurgeOnAnotherReplicaReleasesTheOwner(t *testing.T) {
	t.Parallel()
	_, cb, dir := nodeOnReplicaA(t)
	ctx := ctxT(t)
	sess, err := cb.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 15*time.Second, "node assigned the session", func() bool { _, ok := nodeSessions(t, dir)[sess.Id]; return ok })
	if _, err := cb.Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: sess.Id, Purge: true}); err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 15*time.Second, "node released the purged session", func() bool { _, ok := nodeSessions(t, dir)[sess.Id]; return !ok })
}

// A cancel asked on another replica than the one running the migration
// rolls the session back from there (steps are CAS-guarded), but the
// runner's drain waited only for its own replica's signal: when --wait ran
// out it interrupted the turn of a session no longer moving, abandoning
// the user's prompt. The runner sees a cancel recorded in the store.
func TestMigrateCancelOnAnotherReplicaStopsTheDrain(t *testing.T) {
	t.Parallel()
	_, _, ca, cb := twoReplicas(t)
	src := rawNode(t, ca, "src")
	dst := rawNode(t, ca, "dst")
	go answerImports(ca, dst, "dst")
	waitConnected(t, ca, "src", true)
	waitConnected(t, ca, "dst", true)
	ctx := ctxT(t)
	sess, err := ca.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Node: "src"})
	if err != nil {
		t.Fatal(err)
	}
	token := nextCommand(t, src, func(cmd *castv1.Command) bool { return cmd.GetAssignSession().GetSession().GetId() == sess.Id }).GetAssignSession().OwnerToken
	if _, err := ca.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "src", OwnerToken: token,
		State: castv1.SessionState_SESSION_STATE_RUNNING}); err != nil {
		t.Fatal(err)
	}
	const wait = 2 * time.Second
	started := time.Now()
	m, err := ca.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{sess.Id},
		Wait: durationpb.New(wait), SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 10*time.Second, "session fenced", func() bool {
		s, err := ca.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && s.FencedBy == m.Id
	})
	if _, err := cb.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: m.Id}); err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, cb, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_CANCELLED {
		t.Fatalf("after cancel: %v", m.State)
	}
	// The drain's --wait ends 2s after it began; its interrupt would
	// follow within a tick. Watch past that for one.
	past := time.After(time.Until(started.Add(wait + 3*time.Second)))
	for {
		select {
		case cmd, ok := <-src:
			if !ok {
				t.Fatal("node stream closed")
			}
			if in := cmd.GetInterrupt(); in.GetSessionId() == sess.Id {
				t.Fatalf("the turn of a session whose migration was cancelled was interrupted (abandon=%v)", in.GetAbandon())
			}
		case <-past:
			return
		}
	}
}
