package cli

import (
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast ls` narrows on the client what a control plane older than list
// filters answers whole: the flags' filter, field by field.
func TestLsFilterMatch(t *testing.T) {
	s := &castv1.Session{Agent: "claude", Node: "n1", State: castv1.SessionState_SESSION_STATE_IDLE}
	for _, tc := range []struct {
		f    lsFilter
		want bool
	}{
		{lsFilter{}, true},
		{lsFilter{agent: "claude"}, true},
		{lsFilter{agent: "codex"}, false},
		{lsFilter{node: "n1", state: "idle"}, true},
		{lsFilter{node: "n2"}, false},
		{lsFilter{agent: "claude", state: "running"}, false},
	} {
		if got := tc.f.match(s); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.f, got, tc.want)
		}
	}
}

// `cast ls --node` with a node no control plane knows (a typo) is refused
// as `--agent` with an unknown agent is, naming where the nodes are
// listed; it printed "no sessions match" and exited 0. A known node with
// no sessions still lists none.
func TestLsRefusesAnUnknownNode(t *testing.T) {
	_, addr := diffRig(t)
	_, errOut, code := runMain(t, addr, "ls", "--node", "nosuch")
	if code != 2 || !saysAll(errOut, []string{`unknown node "nosuch"`, "cast node ls"}) {
		t.Errorf("cast ls --node nosuch: exit %d, stderr %q; want 2, the node and `cast node ls`", code, errOut)
	}
	out, errOut, code := runMain(t, addr, "ls", "--node", "n1")
	if code != 0 || !strings.Contains(out+errOut, "no sessions match") {
		t.Errorf("cast ls --node n1: exit %d, out %q, stderr %q; want 0 and no sessions", code, out, errOut)
	}
}
