package cli

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast account add` warns on stderr, naming the flag, when no connected
// node would write the account into the agent's store (each was started
// without --fleet-accounts and keeps its user's own login); once one
// would, it says nothing more.
func TestAccountAddWarnsWhenNoNodeApplies(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	addr := srv.Addr()
	c := testharness.Dial(t, addr)
	testharness.StartNode(t, addr, "n1", func(c *node.Config) { c.AgentBins = map[string]string{} })
	testharness.WaitConnected(t, c, "n1", true)
	creds := writeLogins(t)
	out, errOut, code := runMain(t, addr, "account", "add", "w1", "--agent", "claude", "--credentials", creds["claude"])
	if code != 0 || !strings.Contains(out, "stored claude account w1") || !saysAll(errOut, []string{"no connected node", "n1", "--fleet-accounts", "--node-fleet-accounts"}) {
		t.Errorf("add with no applying node: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	testharness.StartNode(t, addr, "n2", func(c *node.Config) { c.AgentBins, c.FleetAccounts = map[string]string{}, true })
	testharness.WaitConnected(t, c, "n2", true)
	if out, errOut, code := runMain(t, addr, "account", "add", "w2", "--agent", "claude", "--credentials", creds["claude"]); code != 0 || errOut != "" {
		t.Errorf("add with n2 applying: exit %d, stdout %q, stderr %q; want no warning", code, out, errOut)
	}
}
