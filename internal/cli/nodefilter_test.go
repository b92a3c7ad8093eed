package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast node ls --label L --connected true|false` sends ListNodes'
// filter; a bad value is a usage mistake (exit 2) refused before any call,
// and both flags complete (labels from the nodes, connected its two values).
func TestNodeListFilters(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	testharness.StartNode(t, srv.Addr(), "n1", func(c *node.Config) {
		c.AgentBins = map[string]string{}
		c.Labels = []string{"linux"}
	})
	c := testharness.Dial(t, srv.Addr())
	testharness.WaitConnected(t, c, "n1", true)
	addr := srv.Addr()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--label", "linux"}, []string{"n1"}},
		{[]string{"--label", "gpu"}, nil},
		{[]string{"--connected", "true"}, []string{"n1"}},
		{[]string{"--connected", "false"}, nil},
		{[]string{"--label", "linux", "--connected", "false"}, nil},
	} {
		out := mustMain(t, addr, append([]string{"node", "ls", "-o", "name"}, tc.args...)...)
		if got := lines(out); !slices.Equal(got, tc.want) {
			t.Errorf("node ls %q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--connected", "yes"}, "--connected is true or false"},
		{[]string{"--label", "not a label"}, "--label"},
	} {
		_, errOut, code := runMain(t, addr, append([]string{"node", "ls"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("node ls %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	// The node detects more labels of its own (vm, ...): all are offered,
	// its name is not.
	if got := complete(t, addr, "node", "ls", "--label", ""); !slices.Contains(got, "linux") || slices.Contains(got, "n1") {
		t.Errorf("--label completes %q, want the node's labels", got)
	}
	if got := complete(t, addr, "nodes", "--connected", ""); !slices.Equal(got, []string{"true", "false"}) {
		t.Errorf("--connected completes %q, want [true false]", got)
	}
}
