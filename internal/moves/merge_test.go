package moves_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// mergeRig is a parent that answered one message and a fork of it, over a
// real store, with no node: merges touch only the store.
type mergeRig struct {
	s            *store.Store
	parent, fork string
	parentToken  int64
	ctx          context.Context
	t            *testing.T
}

func newMergeRig(t *testing.T) *mergeRig {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	// n1 has claude: a fork onto an agent its node lacks is refused.
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1", Agents: []*castv1.AgentInstall{{Name: "claude"}}}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	r := &mergeRig{s: s, parent: p.Session.Id, parentToken: p.Token, ctx: ctx, t: t}
	r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "start")
	r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "started")
	r.delivered(1)
	f, err := moves.Fork(ctx, s, nil, moves.ForkRequest{SessionID: r.parent, RequestID: fence.RequestKey("test-user", ids.NewClientID())})
	if err != nil {
		t.Fatal(err)
	}
	r.fork = f.Id
	return r
}

func (r *mergeRig) add(id string, kind castv1.MessageKind, text string) int64 {
	r.t.Helper()
	out, err := r.s.Append(r.ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: kind, Text: text}}, fence.Guard{})
	if err != nil {
		r.t.Fatal(err)
	}
	return out[0].Seq
}

// delivered records what the parent's node reports at a turn's end.
func (r *mergeRig) delivered(seq int64) {
	r.t.Helper()
	if _, err := r.s.SetState(r.ctx, r.parent, fence.Guard{Node: "n1", Token: r.parentToken},
		fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, DeliveredSeq: seq}); err != nil {
		r.t.Fatal(err)
	}
}

// A fork's work larger than a slice's budget is merged as one message
// that still fits, whole, in the parent's next delta at the same budget
// (the node renders it as one item there; an item that does not fit is
// left out, and the agent would get a pointer instead of the work).
func TestMergedWorkFitsTheParentsNextDelta(t *testing.T) {
	r := newMergeRig(t)
	// 40 KiB of work in small items against a 16 KiB budget: the chosen
	// ones fill it to the last few bytes.
	for i := range 150 {
		r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_USER, fmt.Sprintf("step %d %s", i, strings.Repeat("u", 100)))
		r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, fmt.Sprintf("did %d %s", i, strings.Repeat("a", 100)))
	}
	m, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork})
	if err != nil {
		t.Fatal(err)
	}
	if m.Omitted == 0 || m.PromptSeq != 0 {
		t.Fatalf("merge: %d omitted (want some), prompt #%d (want none)", m.Omitted, m.PromptSeq)
	}
	msgs, _, err := r.s.ListMessages(r.ctx, r.parent, 3, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Kind != castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
		t.Fatalf("the parent got %d messages, want a notice and the merged history", len(msgs))
	}
	claude, _ := agents.Lookup("claude")
	delta := delivery.Slice([]transcript.Message{wire.FromProto(msgs[1])}, delivery.SliceOptions{SessionID: r.parent, ContextWindow: claude.ContextWindow})
	if delta.Included != 1 {
		t.Fatalf("the merged message (%d bytes) does not fit the parent's next delta (budget %d)", len(msgs[1].Text), delta.Budget)
	}
}

// A merge is refused while the parent has a user message no turn took
// yet (that turn's answer, stored after the merge, would mark the merged
// work seen), and goes through once the node reports it delivered.
func TestMergeRefusedWhileAParentMessageWaits(t *testing.T) {
	r := newMergeRig(t)
	r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "fork work")
	waiting := r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "queued")
	_, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork, Run: true})
	if !errs.HasReason(err, "PARENT_PENDING") || !strings.Contains(err.Error(), fmt.Sprintf("#%d", waiting)) {
		t.Fatalf("merge with a message waiting: %v", err)
	}
	r.delivered(waiting)
	m, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork, Run: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.PromptSeq == 0 {
		t.Fatal("merge --run stored no prompt")
	}
}

// A user message a node adopted from the agent's own file (the user ran
// the agent directly) is history, not a message waiting for a turn: it
// does not hold a merge back.
func TestMergeNotHeldByAdoptedRows(t *testing.T) {
	r := newMergeRig(t)
	r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "fork work")
	if _, err := r.s.Append(r.ctx, r.parent, []*castv1.Message{{ClientId: ids.AdoptedPrefix + "d1.1",
		Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "typed in the agent directly"}}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if _, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork}); err != nil {
		t.Fatalf("merge after an adopted user row: %v", err)
	}
}
