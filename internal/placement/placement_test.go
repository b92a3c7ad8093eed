package placement

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func node(name string, up bool, agents ...string) *castv1.Node {
	n := &castv1.Node{Name: name, Connected: up}
	for _, a := range agents {
		n.Agents = append(n.Agents, &castv1.AgentInstall{Name: a, Accounts: []string{"personal"}})
	}
	return n
}

func TestPick(t *testing.T) {
	nodes := []*castv1.Node{node("down", false, "grok"), node("laptop", true, "claude", "codex"), node("bare", true)}
	for _, tc := range []struct {
		want, agent, got, reason, msg string
	}{
		{"", "codex", "laptop", "", ""},
		{"laptop", "claude", "laptop", "", ""},
		{"", "grok", "", errs.ReasonNoNode, "no connected node has the grok CLI (connected: laptop (claude, codex); bare (no agent CLIs))"},
		{"bare", "claude", "", errs.ReasonNoNode, "node bare has no claude CLI (it has no agent CLIs)"},
		{"down", "grok", "", errs.ReasonNodeNotConn, `node "down" is not connected`},
		{"nosuch", "claude", "", errs.ReasonNotFound, `node "nosuch" is not registered`},
	} {
		got, err := Pick(nodes, tc.want, tc.agent)
		if got != tc.got || (tc.reason == "") != (err == nil) || (err != nil && (!errs.HasReason(err, tc.reason) || !strings.Contains(err.Error(), tc.msg))) {
			t.Errorf("Pick(%q, %q) = %q, %v; want %q, %s %q", tc.want, tc.agent, got, err, tc.got, tc.reason, tc.msg)
		}
	}
	if _, err := Pick(nil, "", "claude"); !errs.HasReason(err, errs.ReasonNoNode) || !strings.Contains(err.Error(), "no node is connected") {
		t.Errorf("Pick with no nodes: %v", err)
	}
}

func TestCheckAccount(t *testing.T) {
	nodes := []*castv1.Node{node("laptop", true, "claude")}
	for _, tc := range []struct {
		node, agent, account, reason string
	}{
		{"laptop", "claude", "personal", ""},
		{"laptop", "claude", "work", errs.ReasonUnknownAccount},
		{"laptop", "codex", "personal", errs.ReasonUnknownAccount},
		{"nosuch", "claude", "personal", errs.ReasonNotFound},
	} {
		err := CheckAccount(nodes, tc.node, tc.agent, tc.account)
		if (tc.reason == "") != (err == nil) || (err != nil && !errs.HasReason(err, tc.reason)) {
			t.Errorf("CheckAccount(%s, %s, %s) = %v, want %s", tc.node, tc.agent, tc.account, err, tc.reason)
		}
	}
}
