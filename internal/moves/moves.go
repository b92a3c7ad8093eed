// Package moves holds the moves of a session within the control plane:
// switch in place, fork, merge (a fork's work back to its parent) and
// handoff (a new session seeded by a brief a small model writes through
// the Briefer it is given), plus a worker's reports to its parent. A
// switch or fork into a CLI whose canary failed becomes a handoff. It
// knows nothing of gRPC or etcd: it reaches the store only through the
// Store declared here, in the vocabulary of internal/fence (Guard,
// CreateParams, Op*), which internal/store implements.
// Moving a session to another node is internal/migrate's.
package moves

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/transcript"
)

// Store is what the moves need from the store.
type Store interface {
	GetSession(ctx context.Context, id string) (*castv1.Session, error)
	CreateSession(ctx context.Context, p fence.CreateParams) (fence.Created, error)
	UpdateSession(ctx context.Context, id string, fn func(*castv1.Session) error) (*castv1.Session, error)
	ListMessages(ctx context.Context, id string, start, end int64, pageSize int, token string) ([]*castv1.Message, string, error)
	Append(ctx context.Context, id string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error)
	RequestOp(ctx context.Context, id, op string) error
	// RequestInterrupt is an OpInterrupt stopping only agent's turn.
	RequestInterrupt(ctx context.Context, id, agent string) error
	ListNodes(ctx context.Context) ([]*castv1.Node, error)
	ListAgentChecks(ctx context.Context, agent string) ([]*castv1.AgentCheck, error)
	// RequestedSession is the session a create with request key rk made.
	RequestedSession(ctx context.Context, rk string) (string, bool, error)
}

// Fork copy batches: at most this many messages or bytes per append.
const (
	ForkBatchMsgs  = 500
	ForkBatchBytes = 8 << 20
)

// SwitchRequest changes a session's agent, model or effort in place.
type SwitchRequest struct {
	SessionID, Agent, Model, Effort string
	// Failpoint, when set, is called at the switch's named points
	// (FailSwitchBeforeWrite) with their name, for fault tests
	// (failpoint.FromEnv).
	Failpoint func(name string)
}

// FailSwitchBeforeWrite is the point between a switch's read of the
// session (and its decision to interrupt) and its write of the new agent:
// what the store records there (a message, a turn's start) the switch
// did not see.
const FailSwitchBeforeWrite = "switch.before-write"

// Switch applies r. A different agent is refused up front when it cannot
// take over the history (Cursor, Muse); otherwise the running turn is
// interrupted, a divider is stored, the session's agent changes and the
// owner node is told, so its next turn starts the new agent on a
// transcript rebuilt from the neutral copy. The session id never changes,
// except when the version of the agent the node has failed its canary:
// then the switch is a handoff (b writes the brief), and the new session
// is returned, its HandoffFrom set to the session.
func Switch(ctx context.Context, st Store, b Briefer, r SwitchRequest) (*castv1.Session, error) {
	sess, err := st.GetSession(ctx, r.SessionID)
	if err != nil {
		return nil, err
	}
	to, target, err := switchTarget(sess, r)
	if err != nil {
		return nil, err
	}
	changeAgent, sent := to != sess.Agent, false
	if changeAgent {
		why, err := canSwitchTo(ctx, st, sess, to)
		if err != nil {
			return nil, err
		}
		if why != "" {
			return handoffInstead(ctx, st, b, HandoffRequest{SessionID: sess.Id, ToAgent: to, Model: r.Model, Node: sess.Node, InPlace: true},
				"A switch to "+target.DisplayName, why)
		}
		if sent, err = interruptTurn(ctx, st, sess); err != nil {
			return nil, err
		}
	}
	if r.Failpoint != nil {
		r.Failpoint(FailSwitchBeforeWrite)
	}
	old := sess
	startedSince, from := false, ""
	updated, err := st.UpdateSession(ctx, sess.Id, func(s *castv1.Session) error {
		if err := archive.Sendable(s); err != nil { // archived meanwhile
			return err
		}
		// A turn whose start the store recorded after the read above
		// (a parked turn a fleet credential woke) runs the old agent:
		// it is stopped too. One that starts after this write is
		// refused (store.SetState: AGENT_SWITCHED). The interrupt sent
		// on the read stops the turn that read saw in flight (one
		// about to start gets none but on an older node:
		// interruptTurn); once a turn ended since (the delivery cursor
		// moved), the turn in flight is another (a message stored
		// after the read ran once that one stopped), so it is sent
		// again. Not for the same turn's changes (a permission prompt):
		// a second interrupt reaching the node after that turn ended
		// would stop the next one before it started.
		startedSince = changeAgent && fence.TurnInFlight(s) && (!sent || s.DeliveredSeq > sess.DeliveredSeq)
		from = s.Agent // the store records a start only for its agent
		switched(s, r, to, changeAgent)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if startedSince {
		if err := st.RequestInterrupt(ctx, sess.Id, from); err != nil {
			return nil, err
		}
	}
	if sess.LastSeq > 0 || changeAgent {
		notice := divider(old, updated, changeAgent)
		if _, err := st.Append(ctx, sess.Id, []*castv1.Message{notice}, fence.Guard{}); err != nil {
			return nil, err
		}
	}
	if err := st.RequestOp(ctx, sess.Id, fence.OpRefresh); err != nil {
		return nil, err
	}
	return st.GetSession(ctx, sess.Id)
}

// switchTarget is the agent (to, target) a switch r of sess runs, refused
// when the switch has nothing to do or cannot run at all.
func switchTarget(sess *castv1.Session, r SwitchRequest) (string, agents.Agent, error) {
	// An archived session runs no turn again: refused before the
	// interrupt, the record or the divider is written (`cast fork`, which
	// takes --agent too, continues it).
	if err := archive.Sendable(sess); err != nil {
		return "", agents.Agent{}, err
	}
	to, target, err := targetAgent(r.Agent, sess.Agent)
	if err != nil {
		return "", agents.Agent{}, err
	}
	if r.Effort != "" && !contains(target.Caps.EffortLevels, r.Effort) {
		return "", agents.Agent{}, errs.Invalid("%s has no effort level %q (levels: %s)", target.DisplayName, r.Effort, strings.Join(target.Caps.EffortLevels, ", "))
	}
	if to == sess.Agent && r.Model == "" && r.Effort == "" {
		what := "pass --agent, --model or --effort"
		if r.Agent != "" { // the agent it runs was named
			what = "name another agent, or pass --model or --effort"
		}
		return "", agents.Agent{}, errs.Invalid("nothing to switch: the session already runs %s; %s", target.DisplayName, what)
	}
	return to, target, nil
}

// canSwitchTo refuses a switch of sess to agent to when to cannot take
// over or its node cannot run it; why is canaryFailure's answer (the
// switch becomes a handoff).
func canSwitchTo(ctx context.Context, st Store, sess *castv1.Session, to string) (why string, _ error) {
	if err := canTakeOver(to, sess.LastSeq > 0); err != nil {
		return "", err
	}
	// Refused before the session is touched: its node's next turn
	// would fail for want of the CLI. A node that is down keeps the
	// switch (it runs when the node is back, as a message would).
	if err := placeable(ctx, st, sess.Node, to, ""); err != nil && !errs.HasReason(err, errs.ReasonNodeNotConn) {
		return "", err
	}
	if sess.LastSeq == 0 {
		return "", nil
	}
	return canaryFailure(ctx, st, sess.Node, to, needFor(false, false))
}

// interruptTurn interrupts sess's running turn, if it has one (sent): the
// old agent's turn must not keep writing after the switch. An idle session
// has none: the node refused the interrupt, and it and the control plane
// each warned of it. Nor is a turn about to start (a message past the
// delivery cursor) interrupted: its start, recorded after the switch, is
// refused for the old agent (store.SetState: AGENT_SWITCHED) and the new
// one runs its messages, and one recorded before the switch's write is
// stopped there (Switch: startedSince). Interrupted, it ended before it
// started, its messages counted delivered: the new agent answered them
// only with the next message. Except on an older node (capability below
// fence.CapabilityTurnAgent, or not known): its start names no agent and
// the store records it (an agent-less start, by decision), so the old
// agent would run it after the switch; it is interrupted as before.
func interruptTurn(ctx context.Context, st Store, sess *castv1.Session) (sent bool, _ error) {
	if !fence.TurnInFlight(sess) {
		if older, err := olderNode(ctx, st, sess.Node); err != nil || !older {
			return false, err
		}
		if idle, err := RunsNothing(ctx, st, sess); err != nil || idle {
			return false, err
		}
	}
	// It names the old agent: reaching the node after that turn ended, it
	// must not stop the new agent's.
	return true, st.RequestInterrupt(ctx, sess.Id, sess.Agent)
}

// olderNode reports whether node runs a turn's start the store cannot
// refuse for the old agent: it reported a capability version below
// fence.CapabilityTurnAgent, or none (its record gone).
func olderNode(ctx context.Context, st Store, node string) (bool, error) {
	n, err := nodeNamed(ctx, st, node)
	return n.GetCapabilityVersion() < fence.CapabilityTurnAgent, err
}

// switched applies switch r to the stored session s (to: its agent).
func switched(s *castv1.Session, r SwitchRequest, to string, changeAgent bool) {
	if changeAgent {
		s.Agent, s.Model, s.Effort = to, r.Model, r.Effort
		// The node runs what failed for the old agent on the new one
		// (it clears its FailedSeq): those messages wait no longer.
		if s.HeldSeq != 0 && fence.Holds(s.State) {
			// Nor is the session parked or failed: that was the old
			// agent's turn, and its exit code (a 429's) no result of the
			// prompt, which runs again, as an abandoned turn's is not.
			// `cast get` showed the new agent running it beside the old
			// agent's "last error". Queued for the new agent, it is idle.
			s.State, s.StateReason, s.LastExitCode = castv1.SessionState_SESSION_STATE_IDLE, "", 0
		}
		s.HeldSeq = 0
	}
	if r.Model != "" {
		s.Model = r.Model
	}
	if r.Effort != "" {
		s.Effort = r.Effort
	}
}

// divider is the notice drawn in the thread at a switch.
func divider(old, cur *castv1.Session, agentChanged bool) *castv1.Message {
	m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, Agent: cur.Agent, Model: cur.Model}
	if agentChanged {
		m.NoticeType = transcript.NoticeAgentSwitch
		m.Text = fmt.Sprintf("Now using %s (was %s)\n\nThe conversation moved from %s to %s. This session continues here. History above is the same thread.",
			label(cur), label(old), agents.DisplayName(old.Agent), agents.DisplayName(cur.Agent))
		return m
	}
	m.NoticeType = transcript.NoticeModelSwitch
	m.Text = fmt.Sprintf("Now using %s (was %s)", label(cur), label(old))
	return m
}

func label(s *castv1.Session) string {
	l := agents.DisplayName(s.Agent)
	if s.Model != "" {
		l += " · " + s.Model
	}
	if s.Effort != "" {
		l += " · " + s.Effort
	}
	return l
}

// targetAgent is the agent a switch or fork goes to: the one asked for,
// else the session's own. An unknown one is refused before anything moves.
func targetAgent(asked, own string) (string, agents.Agent, error) {
	name := cmp.Or(asked, own)
	a, ok := agents.Lookup(name)
	if !ok {
		return "", a, errs.New(errs.KindInvalid, errs.ReasonUnknownAgent, "unknown agent %q; use one of %s", name, strings.Join(agents.Names(), ", "))
	}
	return name, a, nil
}

// canTakeOver refuses, as a failed precondition, an agent that cannot
// continue another's session (with history: one that already has messages).
func canTakeOver(agent string, history bool) error {
	if err := agents.CheckTakeover(agent, history); err != nil {
		return errs.New(errs.KindFailedPrecondition, "AGENT_CANNOT_TAKE_OVER", "%s", err.Error())
	}
	return nil
}

// modelFor is the model a new session of agent runs: the one asked for,
// else src's when the agent stays the same (another agent's model names
// mean nothing to it, so it gets its own default).
func modelFor(asked, agent string, src *castv1.Session) string {
	if asked == "" && agent == src.Agent {
		return src.Model
	}
	return asked
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
