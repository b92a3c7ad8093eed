// Package placement decides which node runs a session, from what the nodes
// advertise (their agents and each agent's named accounts). It refuses up
// front what no node can run, so nothing is stored that fails later.
package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Pick returns want if it is connected and has agent, else (want empty)
// the first connected node that has agent. An empty agent needs no CLI:
// any connected node will do. The refusal names the nodes and the agents
// they have.
func Pick(nodes []*castv1.Node, want, agent string) (string, error) {
	var connected []*castv1.Node
	for _, n := range nodes {
		if want != "" && n.Name != want {
			continue
		}
		if !n.Connected {
			if want == "" {
				continue
			}
			return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
				"node %q is not connected; see `cast nodes`", want).With("node", want)
		}
		if agent == "" || install(n, agent) != nil {
			return n.Name, nil
		}
		connected = append(connected, n)
	}
	switch {
	case want != "" && len(connected) == 0:
		return "", errs.New(errs.KindNotFound, errs.ReasonNotFound, "node %q is not registered; see `cast nodes`", want).With("node", want)
	case len(connected) == 0:
		return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode,
			"no node is connected; start one with `node --controlplane ADDR` (or run `controlplane --dev`)")
	case want != "":
		return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode,
			"node %s has no %s CLI (it has %s); install it there, or pick another node or agent", want, agent, agentList(connected[0])).
			With("node", want).With("agent", agent)
	}
	return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode,
		"no connected node has the %s CLI (connected: %s); install it on a node, or pick another agent", agent, describe(connected)).
		With("agent", agent)
}

// PickOwner is Pick for a session that runs no CLI until it is given a
// message (an import): a node with agent when one is connected, else any
// connected node, since the session is meant to be switched, forked or
// handed off to an agent that is installed; with no node connected at all
// (and none asked for), "": the session is stored unowned and the first
// node to connect takes it.
func PickOwner(nodes []*castv1.Node, want, agent string) (string, error) {
	if node, err := Pick(nodes, want, agent); err == nil {
		return node, nil
	}
	if want == "" && !slices.ContainsFunc(nodes, func(n *castv1.Node) bool { return n.Connected }) {
		return "", nil
	}
	return Pick(nodes, want, "")
}

// CheckAccount refuses an account the node does not have for agent (the
// node advertises the names from its agents config).
func CheckAccount(nodes []*castv1.Node, node, agent, account string) error {
	for _, n := range nodes {
		if n.Name != node {
			continue
		}
		inst := install(n, agent)
		if inst != nil && slices.Contains(inst.Accounts, account) {
			return nil
		}
		have := "none"
		if inst != nil && len(inst.Accounts) > 0 {
			have = strings.Join(inst.Accounts, ", ")
		}
		return errs.New(errs.KindFailedPrecondition, errs.ReasonUnknownAccount,
			"node %s has no %s account %q (it has: %s); add it under %q.accounts in that node's --agents-config", node, agent, account, have, agent).
			With("node", node).With("account", account)
	}
	return errs.New(errs.KindNotFound, errs.ReasonNotFound, "node %q is not registered; see `cast nodes`", node).With("node", node)
}

func install(n *castv1.Node, agent string) *castv1.AgentInstall {
	for _, a := range n.Agents {
		if a.Name == agent {
			return a
		}
	}
	return nil
}

func agentList(n *castv1.Node) string {
	var names []string
	for _, a := range n.Agents {
		names = append(names, a.Name)
	}
	if len(names) == 0 {
		return "no agent CLIs"
	}
	return strings.Join(names, ", ")
}

// describe is "laptop (claude, codex); build1 (no agent CLIs)".
func describe(nodes []*castv1.Node) string {
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s (%s)", n.Name, agentList(n)))
	}
	return strings.Join(parts, "; ")
}
