package moves_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/testharness"
)

// A switch or a migration of a worker into an agent version whose canary
// failed becomes a handoff: the new session stands in for the worker, so
// it stays its parent's worker (the parent hears how its turns end) and
// runs on the worker's worktree branch. Before, the handoff made a session
// of its own, unlinked from the parent, in the checkout instead of the
// worktree. Against the real store on embedded etcd.
func TestHandoffInPlaceKeepsTheWorkersPlace(t *testing.T) {
	const broken = "0.172.0-nohistory"
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"n1", "n2"} {
		n := &castv1.Node{Name: name, Agents: []*castv1.AgentInstall{{Name: "claude", Version: "2.0.0"}, {Name: "codex", Version: broken}}}
		if _, err := s.RegisterNode(ctx, n, "test", 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	failed := []*castv1.AgentCheck{
		{Agent: "codex", Version: broken, Capability: "resume", Detail: "the model got the new prompt without the history"},
		{Agent: "claude", Version: "2.0.0", Capability: "resume", Detail: "the model got the new prompt without the history"},
	}
	if err := s.PutAgentChecks(ctx, failed); err != nil {
		t.Fatal(err)
	}
	parent, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp/proj", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	worker := func(t *testing.T) *castv1.Session {
		t.Helper()
		w, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp/proj", Node: "n1",
			ParentID: parent.Session.Id, Subagent: true, WorktreeBranch: "cast/worker-feature"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, w.Session.Id, []*castv1.Message{
			{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "build the feature"},
			{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "built"},
		}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSession(ctx, w.Session.Id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	b := &briefs{}
	for _, tc := range []struct {
		name string
		move func(w *castv1.Session) (string, error)
	}{
		{"switch", func(w *castv1.Session) (string, error) {
			ho, err := moves.Switch(ctx, s, b, moves.SwitchRequest{SessionID: w.Id, Agent: "codex"})
			return ho.GetId(), err
		}},
		{"migration", func(w *castv1.Session) (string, error) {
			id, _, err := moves.Divert(ctx, s, b, w, "n2")
			return id, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := worker(t)
			id, err := tc.move(w)
			if err != nil {
				t.Fatal(err)
			}
			ho, err := s.GetSession(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ho.Id == w.Id || ho.HandoffFrom != w.Id {
				t.Fatalf("no handoff: %s, handoff from %q", ho.Id, ho.HandoffFrom)
			}
			if ho.ParentId != parent.Session.Id || !ho.Subagent || ho.WorktreeBranch != "cast/worker-feature" {
				t.Errorf("the handoff of worker %s: parent %q (subagent %v), branch %q; want the worker's parent %s and branch cast/worker-feature",
					w.Id, ho.ParentId, ho.Subagent, ho.WorktreeBranch, parent.Session.Id)
			}
		})
	}
}
