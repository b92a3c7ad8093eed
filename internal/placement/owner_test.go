package placement

import (
	"testing"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// An import runs no CLI: it prefers a node with the agent, else any
// connected node; with none connected it is stored for the first to
// connect (""), unless a node was asked for.
func TestPickOwner(t *testing.T) {
	nodes := []*castv1.Node{node("down", false, "grok"), node("laptop", true, "claude"), node("build", true, "muse")}
	for _, tc := range []struct {
		nodes            []*castv1.Node
		want, agent, got string
		reason           string
	}{
		{nodes, "", "muse", "build", ""},
		{nodes, "", "grok", "laptop", ""},
		{nodes, "laptop", "grok", "laptop", ""},
		{nodes, "down", "grok", "", errs.ReasonNodeNotConn},
		{nodes[:1], "", "grok", "", ""},
		{nil, "", "grok", "", ""},
		{nodes[:1], "down", "grok", "", errs.ReasonNodeNotConn},
	} {
		got, err := PickOwner(tc.nodes, tc.want, tc.agent)
		if got != tc.got || (tc.reason == "") != (err == nil) || (err != nil && !errs.HasReason(err, tc.reason)) {
			t.Errorf("PickOwner(%q, %q) = %q, %v; want %q, %s", tc.want, tc.agent, got, err, tc.got, tc.reason)
		}
	}
}
