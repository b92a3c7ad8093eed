package moves_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A switch of an archived session is refused before anything is written.
// Before, it interrupted the session, changed its model or agent and drew
// the divider in a session closed to messages, and answered as done: the
// user's next `cast send` was refused.
func TestSwitchOfAnArchivedSessionIsRefused(t *testing.T) {
	r := newMergeRig(t)
	if _, err := archive.Archive(r.ctx, r.s, r.parent); err != nil {
		t.Fatal(err)
	}
	before, err := r.s.GetSession(r.ctx, r.parent)
	if err != nil {
		t.Fatal(err)
	}
	_, err = moves.Switch(r.ctx, r.s, nil, moves.SwitchRequest{SessionID: r.parent, Model: "claude-opus-4-1"})
	if e, ok := errs.As(err); !ok || e.Kind != errs.KindFailedPrecondition || e.Reason != errs.ReasonSessionArchived {
		t.Fatalf("switch of an archived session: %v, want FAILED_PRECONDITION %s", err, errs.ReasonSessionArchived)
	}
	after, err := r.s.GetSession(r.ctx, r.parent)
	if err != nil {
		t.Fatal(err)
	}
	if after.Model != before.Model || after.LastSeq != before.LastSeq {
		t.Fatalf("the refused switch wrote: model %q (was %q), last seq %d (was %d)", after.Model, before.Model, after.LastSeq, before.LastSeq)
	}
}

// countsOps is a store that counts the ops requested of the session's
// owner node, and the agent each interrupt named (stops).
type countsOps struct {
	*store.Store
	ops   []string
	stops []string
}

func (s *countsOps) RequestOp(ctx context.Context, id, op string) error {
	s.ops = append(s.ops, op)
	if op == fence.OpInterrupt {
		s.stops = append(s.stops, "")
	}
	return s.Store.RequestOp(ctx, id, op)
}

// RequestInterrupt counts as an interrupt (a switch's names the agent it
// stops).
func (s *countsOps) RequestInterrupt(ctx context.Context, id, agent string) error {
	s.ops, s.stops = append(s.ops, fence.OpInterrupt), append(s.stops, agent)
	return s.Store.RequestInterrupt(ctx, id, agent)
}

// A switch to another agent stops the old agent's turn, and asks the node
// to only when one runs. One about to start (a message past the delivery
// cursor) is not stopped: its start is refused for the old agent and the
// new one runs it; interrupted, it ended unstarted and its messages waited
// for the next one. Before, an idle session's switch sent the interrupt anyway, and
// the node and the control plane each logged a warning that it was
// refused ("session … has no running turn"). A failed session whose
// turn holds its message (the CLI not installed or not logged in: it runs
// with the next message) runs nothing either; its switch sent the
// interrupt, which the node refused with the same warnings. So did a
// parked one's (a usage limit: its message runs with the next fleet
// credential or the next message), which ran nothing either.
//
// An older node (capability_version 1, v0.1, in the version-skew window;
// 0: not known) names no agent in a turn's start, which the store records
// (TestAgentlessTurnStartAfterASwitchIsRecorded): its turn about to start
// would run the old agent after the switch, so it is interrupted as
// before (wantOlder).
func TestSwitchInterruptsOnlyARunningTurn(t *testing.T) {
	failed, parked := castv1.SessionState_SESSION_STATE_FAILED, castv1.SessionState_SESSION_STATE_PARKED
	for _, tc := range []struct {
		name          string
		state         castv1.SessionState
		held          bool // a user message the failed or parked turn holds (held seq)
		waiting       bool // a user message past the delivery cursor
		wantInterrupt bool // on a node of capability 2
		wantOlder     bool // on a node of capability 1 or not known (0)
	}{
		{"idle", castv1.SessionState_SESSION_STATE_IDLE, false, false, false, false},
		{"idle with a message about to run", castv1.SessionState_SESSION_STATE_IDLE, false, true, false, true},
		{"running", castv1.SessionState_SESSION_STATE_RUNNING, false, false, true, true},
		{"failed holding its message", failed, true, false, false, false},
		{"failed holding a message, another about to run", failed, true, true, false, true},
		{"failed with a message about to run", failed, false, true, false, true},
		{"parked holding its message", parked, true, false, false, false},
		{"parked holding a message, another about to run", parked, true, true, false, true},
	} {
		for _, capability := range []int32{2, 1, 0} {
			want := tc.wantInterrupt
			if capability < 2 {
				want = tc.wantOlder
			}
			t.Run(fmt.Sprintf("%s/capability %d", tc.name, capability), func(t *testing.T) {
				switchInterrupts(t, tc.state, tc.held, tc.waiting, capability, want)
			})
		}
	}
}

// switchInterrupts is a case of TestSwitchInterruptsOnlyARunningTurn: a
// claude session on a node of capability, its turn ended in state
// (holding a message: holds), a message past its delivery cursor
// (waiting), switched to codex; want: the switch interrupts.
func switchInterrupts(t *testing.T, state castv1.SessionState, holds, waiting bool, capability int32, want bool) {
	s := &countsOps{Store: testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)}
	ctx, p := claudeSessionOn(t, s.Store, capability)
	id := p.Session.Id
	for _, k := range []castv1.MessageKind{castv1.MessageKind_MESSAGE_KIND_USER, castv1.MessageKind_MESSAGE_KIND_ASSISTANT} {
		if _, err := s.Append(ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: k, Text: "x"}}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	var held int64
	if holds {
		m, err := s.Append(ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "held"}}, fence.Guard{})
		if err != nil {
			t.Fatal(err)
		}
		held = m[0].Seq
	}
	if _, err := s.SetState(ctx, id, fence.Guard{Node: "n1", Token: p.Token}, fence.TurnState{State: state, Reason: "claude: rate limited", ExitCode: 1, DeliveredSeq: 2, HeldSeq: held}); err != nil {
		t.Fatal(err)
	}
	if waiting {
		if _, err := s.Append(ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "next"}}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := moves.Switch(ctx, s, nil, moves.SwitchRequest{SessionID: id, Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	if got := slices.Contains(s.ops, fence.OpInterrupt); got != want {
		t.Fatalf("switch asked the node to interrupt: %v, want %v (ops %q)", got, want, s.ops)
	}
	if !holds {
		return
	}
	// The node runs the held message on the new agent now: a second
	// switch stops that turn.
	after, err := s.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if idle, err := moves.RunsNothing(ctx, s, after); err != nil || idle {
		t.Fatalf("after the switch the held message counts as running nothing (%v, %v; held seq %d)", idle, err, after.HeldSeq)
	}
	// Nor is the session failed or parked: that was the old agent's turn,
	// whose error `cast get` showed beside the new agent's.
	if after.State != castv1.SessionState_SESSION_STATE_IDLE || after.StateReason != "" || after.LastExitCode != 0 {
		t.Fatalf("after the switch: %v (%q), exit code %d; want idle, no error of the old agent", after.State, after.StateReason, after.LastExitCode)
	}
}

// A switch to the agent the session already runs, and nothing else, is
// refused with what to pass instead: it told the user, who had passed
// --agent, to "pass --agent, --model or --effort".
func TestSwitchToTheSameAgentSaysWhatToPass(t *testing.T) {
	r := newMergeRig(t)
	for _, tc := range []struct {
		agent, want string
	}{
		{"claude", "nothing to switch: the session already runs Claude Code; name another agent, or pass --model or --effort"},
		{"", "nothing to switch: the session already runs Claude Code; pass --agent, --model or --effort"},
	} {
		_, err := moves.Switch(r.ctx, r.s, nil, moves.SwitchRequest{SessionID: r.parent, Agent: tc.agent})
		if e, ok := errs.As(err); !ok || e.Kind != errs.KindInvalid || e.Msg != tc.want {
			t.Errorf("switch --agent %q: %v, want INVALID %q", tc.agent, err, tc.want)
		}
	}
}

// claudeSession is a claude session on node n1, which runs claude and
// codex and names the agent of a turn's start (capability 2).
func claudeSession(t *testing.T, s *store.Store) (context.Context, fence.Created) {
	t.Helper()
	return claudeSessionOn(t, s, 2)
}

// claudeSessionOn is claudeSession on a node of capability version
// capability (0: one that did not say).
func claudeSessionOn(t *testing.T, s *store.Store, capability int32) (context.Context, fence.Created) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	n1 := &castv1.Node{Name: "n1", Agents: []*castv1.AgentInstall{{Name: "claude"}, {Name: "codex"}}, CapabilityVersion: capability}
	if _, err := s.RegisterNode(ctx, n1, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, p
}

// startsBeforeUpdate is a store whose session's turn starts (its node's
// RUNNING report lands, on the old agent) just before the switch's write.
type startsBeforeUpdate struct {
	*countsOps
	start func(ctx context.Context)
}

func (s *startsBeforeUpdate) UpdateSession(ctx context.Context, id string, fn func(*castv1.Session) error) (*castv1.Session, error) {
	if s.start != nil {
		s.start(ctx)
		s.start = nil
	}
	return s.Store.UpdateSession(ctx, id, fn)
}

// A parked session runs nothing, so a switch sends no interrupt for it; but
// a fleet credential may wake its held turn as the switch runs, its start
// recorded between the switch's read and its write. That turn runs the
// old agent after the switch: the switch stops it. Before, the old agent
// ran the held prompt and wrote its answer under the switch's divider.
func TestSwitchStopsATurnThatStartedAsItRan(t *testing.T) {
	s := &startsBeforeUpdate{countsOps: &countsOps{Store: testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)}}
	ctx, p := claudeSession(t, s.Store)
	id, g := p.Session.Id, fence.Guard{Node: "n1", Token: p.Token}
	if _, err := s.Append(ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "held"}}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetState(ctx, id, g, fence.TurnState{State: castv1.SessionState_SESSION_STATE_PARKED, HeldSeq: 1}); err != nil {
		t.Fatal(err)
	}
	s.start = func(ctx context.Context) {
		if _, err := s.SetState(ctx, id, g, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING, Agent: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := moves.Switch(ctx, s, nil, moves.SwitchRequest{SessionID: id, Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	if n := slices.Index(s.ops, fence.OpInterrupt); n < 0 || slices.Index(s.ops, fence.OpRefresh) < n {
		t.Fatalf("ops %q; want the turn that started on the old agent interrupted, before the refresh", s.ops)
	}
}

// A switch of a session whose turn runs interrupts that turn as it reads
// the session; a message stored before the switch's write then starts
// another turn on the old agent once the first one stopped, its start
// recorded before the write. That turn is stopped too. Before, the
// interrupt already sent counted for it: the old agent ran the message to
// the end and wrote its answer under the switch's divider (e2e
// TestDeliveryAtMoreSeams/switchgap-second-turn). The same turn changing
// in the gap (it asks a permission) gets no second interrupt: reaching
// the node after that turn ended, it would stop the next turn unstarted.
func TestSwitchStopsASecondTurnThatStartedAsItRan(t *testing.T) {
	waiting := castv1.SessionState_SESSION_STATE_WAITING_PERMISSION
	for _, tc := range []struct {
		name           string
		secondTurn     bool
		wantInterrupts int
	}{{"another turn", true, 2}, {"the same turn asks a permission", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &startsBeforeUpdate{countsOps: &countsOps{Store: testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)}}
			ctx, p := claudeSession(t, s.Store)
			id, g := p.Session.Id, fence.Guard{Node: "n1", Token: p.Token}
			user := func(text string) int64 {
				m, err := s.Append(ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text}}, fence.Guard{})
				if err != nil {
					t.Fatal(err)
				}
				return m[0].Seq
			}
			setState := func(ctx context.Context, ts fence.TurnState) {
				if _, err := s.SetState(ctx, id, g, ts); err != nil {
					t.Fatal(err)
				}
			}
			user("first")
			setState(ctx, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING, Agent: "claude"})
			s.start = func(ctx context.Context) {
				if !tc.secondTurn {
					if _, err := s.Store.UpdateSession(ctx, id, func(sess *castv1.Session) error { sess.State = waiting; return nil }); err != nil {
						t.Fatal(err)
					}
					return
				}
				// The first turn stops (the switch's interrupt), and the
				// message sent meanwhile starts the next one on claude.
				first := user("in the gap") - 1
				setState(ctx, fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, DeliveredSeq: first, Interrupted: true})
				setState(ctx, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING, DeliveredSeq: first, Agent: "claude"})
			}
			if _, err := moves.Switch(ctx, s, nil, moves.SwitchRequest{SessionID: id, Agent: "codex"}); err != nil {
				t.Fatal(err)
			}
			var interrupts []int
			for i, op := range s.ops {
				if op == fence.OpInterrupt {
					interrupts = append(interrupts, i)
				}
			}
			if len(interrupts) != tc.wantInterrupts || slices.Index(s.ops, fence.OpRefresh) < interrupts[len(interrupts)-1] {
				t.Fatalf("ops %q; want %d interrupts, before the refresh", s.ops, tc.wantInterrupts)
			}
			// Each stops only claude's turn: reaching the node after it
			// ended, it must not stop codex's.
			if slices.ContainsFunc(s.stops, func(a string) bool { return a != "claude" }) {
				t.Fatalf("the interrupts name %q; want claude, the agent switched from", s.stops)
			}
		})
	}
}
