package store_test

import (
	"errors"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node's agents are updated by the stream that holds its lease only: a
// stale stream (the node reconnected meanwhile) never overwrites them.
func TestUpdateNodeAgentsIsFencedByTheLease(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	node := &castv1.Node{Name: "n1", Agents: []*castv1.AgentInstall{{Name: "claude", Status: "no login"}}}
	old, err := s.RegisterNode(ctx, node, "test", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.RegisterNode(ctx, node, "test", 30*time.Second) // it reconnected
	if err != nil {
		t.Fatal(err)
	}
	agents := func() []*castv1.AgentInstall {
		nodes, err := s.ListNodes(ctx)
		if err != nil || len(nodes) != 1 {
			t.Fatalf("nodes %v: %v", nodes, err)
		}
		return nodes[0].Agents
	}
	stale := []*castv1.AgentInstall{{Name: "claude", Status: "stale"}}
	if err := s.UpdateNodeAgents(ctx, "n1", old, stale); !errors.Is(err, store.ErrLeaseExpired) {
		t.Fatalf("update from the stale stream: %v, want ErrLeaseExpired", err)
	}
	if got := agents(); got[0].Status != "no login" {
		t.Fatalf("the stale stream's agents were stored: %v", got)
	}
	ready := []*castv1.AgentInstall{{Name: "claude", Ready: true, Status: "logged in"}}
	if err := s.UpdateNodeAgents(ctx, "n1", cur, ready); err != nil {
		t.Fatal(err)
	}
	if got := agents(); len(got) != 1 || !got[0].Ready {
		t.Fatalf("agents after the update: %v", got)
	}
}
