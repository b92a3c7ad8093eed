package controlplane_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/nodeagent"
	"github.com/cast-dev/cast/internal/testharness"
)

// With --node-token-file, node calls without the token are refused with
// UNAUTHENTICATED / NODE_TOKEN_INVALID (a plain API client cannot act as a
// node or fetch fleet credentials), `cast nodes` still works, and a node
// with the token connects.
func TestNodeToken(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-node-token"
	path := filepath.Join(t.TempDir(), "node.token")
	must(t, os.WriteFile(path, []byte(token+"\n"), 0o600))
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.NodeTokenFile = path })
	plain := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)

	if _, err := plain.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{}); err != nil {
		t.Fatalf("ListNodes without the token: %v", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.Unauthenticated || client.ReasonOf(err) != controlplane.ReasonNodeToken {
			t.Fatalf("%s without the token: %v", what, err)
		}
	}
	_, err := plain.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "n1", Agent: "claude", Account: "a", Grant: "g"})
	refused("FetchCredential", err)
	_, err = plain.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: "abc1234", Node: "n1", OwnerToken: 1, State: castv1.SessionState_SESSION_STATE_IDLE})
	refused("ReportTurn", err)
	stream, err := plain.Nodes.Connect(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	refused("Connect", err)

	wrong, err := client.DialNode(srv.Addr(), strings.Repeat("x", 40))
	must(t, err)
	t.Cleanup(func() { wrong.Close() })
	_, err = wrong.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "n1", Agent: "claude", Account: "a", Grant: "g"})
	refused("FetchCredential with a wrong token", err)

	testharness.StartNode(t, srv.Addr(), "n1", func(c *nodeagent.Config) { c.Token = token })
	testharness.WaitFor(t, 20*time.Second, "the node with the token connected", func() bool {
		resp, err := plain.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		return err == nil && len(resp.Nodes) == 1 && resp.Nodes[0].Connected
	})
}
