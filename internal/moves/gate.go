package moves

import (
	"context"
	"fmt"
	"slices"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/capability"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A move that hands a history to an agent (a switch, a fork) relies on the
// agent's installed CLI resuming what cast writes. When the canary verdict
// for that CLI's version on the node says it does not (internal/canary),
// the move becomes a handoff: a new session seeded by a brief, which needs
// nothing of the CLI but a fresh turn, with a notice that says why.

// canaryFailure is why node's installed agent cannot take over a history:
// a failed verdict, among need, for the version the node reports. "" when
// none failed, the version is unknown or it was never checked.
func canaryFailure(ctx context.Context, st Store, node, agent string, need []string) (string, error) {
	version, err := installedVersion(ctx, st, node, agent)
	if err != nil || version == "" {
		return "", err
	}
	checks, err := st.ListAgentChecks(ctx, agent)
	if err != nil {
		return "", err
	}
	// The first failure in check order: the one the others follow from.
	for _, cp := range need {
		for _, c := range checks {
			if c.Version == version && c.Capability == cp && !c.Passed {
				return fmt.Sprintf("%s %s on node %s failed cast's %s check (%s)", agents.DisplayName(agent), version, node, c.Capability, c.Detail), nil
			}
		}
	}
	return "", nil
}

// installedVersion is the version of agent node last reported ("" when
// the node or the agent is unknown).
func installedVersion(ctx context.Context, st Store, node, agent string) (string, error) {
	n, err := nodeNamed(ctx, st, node)
	if err != nil {
		return "", err
	}
	for _, in := range n.GetAgents() {
		if in.Name == agent {
			return in.Version, nil
		}
	}
	return "", nil
}

// nodeNamed is node's record as it last reported it, nil when the store
// holds none.
func nodeNamed(ctx context.Context, st Store, node string) (*castv1.Node, error) {
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n.Name == node {
			return n, nil
		}
	}
	return nil, nil
}

// needFor is what a move into agent relies on: taking over a history, and
// for a fork on the same agent its native fork as well.
func needFor(fork, sameAgent bool) []string {
	if fork && sameAgent {
		return append(slices.Clone(capability.Takeover), capability.Fork)
	}
	return capability.Takeover
}

// handoffInstead runs the handoff a refused move becomes; move names it
// ("a switch to Codex") and why is canaryFailure's answer.
func handoffInstead(ctx context.Context, st Store, b Briefer, r HandoffRequest, move, why string) (*castv1.Session, error) {
	r.Direction = "Continue the conversation from the brief."
	r.Reason = fmt.Sprintf("%s would lose the history: %s. `cast agents` shows every check.", move, why)
	res, err := Handoff(ctx, st, b, r)
	if err != nil {
		return nil, err
	}
	return res.Session, nil
}

// Divert is the handoff a migration of sess to node becomes when node's
// version of the session's agent failed its canary: the new session's id
// and why ("" and "" when the session may move).
func Divert(ctx context.Context, st Store, b Briefer, sess *castv1.Session, node string) (string, string, error) {
	why, err := canaryFailure(ctx, st, node, sess.Agent, capability.Takeover)
	if err != nil || why == "" {
		return "", "", err
	}
	move := "A migration to node " + node
	ho, err := handoffInstead(ctx, st, b, HandoffRequest{SessionID: sess.Id, ToAgent: sess.Agent, Model: sess.Model, Node: node, InPlace: true}, move, why)
	if err != nil {
		return "", "", err
	}
	return ho.Id, fmt.Sprintf("handed off to %s instead: %s would lose the history: %s", ho.Id, move, why), nil
}
