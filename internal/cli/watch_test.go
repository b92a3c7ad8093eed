package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A control plane that ends every WatchSession at once (here: a replica
// started while its etcd user may no longer read a session's messages, so
// etcd refuses the replica's session feed) answers each open with why.
// `cast watch` used to take each answer as a working stream and print
// "lost the control plane; reconnecting" four times a second forever; it
// now says what the control plane said, backs off, and exits non-zero
// within its budget.
func TestWatchGivesUpOnAServerThatEndsEveryStream(t *testing.T) {
	etcd, access := testharness.StartTokenTTLEtcd(t, 300)
	onEtcd := func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir, c.Etcd = []string{etcd.URL}, "", access
	}
	first := testharness.StartControlPlane(t, onEtcd)
	testharness.StartNode(t, first.Addr(), "n1", func(c *node.Config) {
		c.AgentBins = map[string]string{} // its agents are testharness.MissingAgents
	})
	c := testharness.Dial(t, first.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testharness.WaitFor(t, 20*time.Second, "node connected", func() bool {
		resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		return err == nil && len(resp.Nodes) == 1 && resp.Nodes[0].Connected
	})
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	denyRange(ctx, t, etcd.RootClient(t), store.DefaultPrefix+"msgs/"+sess.Id+"/")
	// etcd checks a watch's permission when it is created: the first
	// replica's feed, older than the denial, runs on.
	srv := testharness.StartControlPlane(t, onEtcd)

	var out, errOut bytes.Buffer
	start := time.Now()
	wctx, stop := context.WithTimeout(ctx, retryBudget+30*time.Second) // bounds the old endless loop
	defer stop()
	code := Main(wctx, []string{"--addr", srv.Addr(), "watch", sess.Id, "--from-seq", "0"}, strings.NewReader(""), &out, &errOut)
	took := time.Since(start)
	said := errOut.String()
	t.Logf("cast watch exited %d after %v:\n%s", code, took, said)
	switch {
	case wctx.Err() != nil:
		t.Fatalf("cast watch still ran after %v (%d lines on stderr)", took, strings.Count(said, "\n"))
	case code == 0:
		t.Fatalf("cast watch gave up with exit 0")
	case took < retryBudget:
		t.Fatalf("cast watch gave up after %v, before its budget (%v)", took, retryBudget)
	case strings.Contains(said, "lost the control plane"):
		t.Fatal("cast watch called a stream the control plane ended a lost control plane")
	case !strings.Contains(said, "the control plane ended the watch: watch interrupted") || !strings.Contains(said, "permissions deny"):
		t.Fatal("cast watch did not say what the control plane said")
	case !strings.Contains(said, "kept ending the watch for "+retryBudget.String()):
		t.Fatal("cast watch did not say why it gave up")
	case strings.Count(said, "\n") > 3:
		t.Fatal("cast watch repeated itself")
	}
}

// denyRange takes read and write of the keys under prefix from etcd's
// role cast (testharness.EnableEtcdAuth's), leaving it the rest of the
// store's prefix.
func denyRange(ctx context.Context, t *testing.T, root *clientv3.Client, prefix string) {
	t.Helper()
	all, end := store.DefaultPrefix, clientv3.GetPrefixRangeEnd(store.DefaultPrefix)
	rw := clientv3.PermissionType(clientv3.PermReadWrite)
	if _, err := root.RoleRevokePermission(ctx, "cast", all, end); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{all, prefix}, {clientv3.GetPrefixRangeEnd(prefix), end}} {
		if _, err := root.RoleGrantPermission(ctx, "cast", r[0], r[1], rw); err != nil {
			t.Fatal(err)
		}
	}
}
