package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
	"github.com/cast-dev/cast/internal/testharness"
)

// Token custody end to end with the real Claude (control plane and node
// with --token-custody): a Claude login added as a fleet account stays
// with the custodian node, which refreshes it through `claude mcp list`
// (no model turn) against the fake provider, reached through the test
// HTTPS proxy standing in for platform.claude.com. The agent's shared
// .credentials.json only ever holds the access token, turns run on each
// newer access token (the fake model sees it), no family is revoked and no
// token reaches the node's log.
func TestTokenCustodyClaude(t *testing.T) {
	t.Parallel()
	oa := fakeoauth.Start(t, time.Hour)
	px := oa.Proxy(t, fakeoauth.ClaudeTokenHost)
	r := newCustodyRigFor(t, "claude", func(_ *turnRig, setup map[string]any) {
		setup["env"] = claudeProxyEnv(setup["env"].([]any), px)
	})
	g := addCustodyLogin(t, castCLI(t, r), oa, "claude")

	custodyTurns(t, r, oa, "claude", g, "MARK-C1", "MARK-C2")
	posts := 0
	for _, l := range px.Log() {
		if l == "POST "+fakeoauth.ClaudeTokenHost+fakeoauth.TokenPath {
			posts++
		}
	}
	if posts < 2 || posts != oa.Refreshes() {
		t.Fatalf("%d refreshes through the proxy, %d at the provider", posts, oa.Refreshes())
	}
}

// Token custody is on by default: a Claude fleet login reaches the node's
// store without its refresh token. With the control plane's
// --token-custody=false the node copies the stored file, refresh token and
// all, and says why.
func TestTokenCustodyDefaultAndOff(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("custody=%v", on), func(t *testing.T) {
			r, _, _ := newFleetRigWith(t, func(c *controlplane.Config) {
				if !on {
					c.TokenCustody = false
				}
			})
			raw, err := os.ReadFile(filepath.Join(agenttest.NativeHome(r.homes["claude"], "claude"), claude.Credential{}.File()))
			must(t, err)
			tok, err := claude.Credential{}.Parse(raw)
			must(t, err)
			if tok.HasRefresh == on {
				t.Fatalf("custody %v: the store holds a refresh token: %v", on, tok.HasRefresh)
			}
			if said := strings.Contains(r.node.Output(), "custody does not hold this account"); said == on {
				t.Fatalf("custody %v: the node said it copied: %v", on, said)
			}
		})
	}
}

// claudeProxyEnv is a node's claude env without the API key (the login
// file is used) and with the test proxy that stands in for
// platform.claude.com.
func claudeProxyEnv(env []any, px *fakeoauth.Proxy) []any {
	env = slices.DeleteFunc(env, func(kv any) bool { return strings.HasPrefix(kv.(string), "ANTHROPIC_API_KEY=") })
	for _, kv := range px.Env() {
		env = append(env, kv)
	}
	return env
}

// A switch to an account whose access token expired while it was inactive
// (custody refreshes only the active account) completes once custody has
// refreshed it: the node takes the account through custody (here it is
// the custodian, so it refreshes through the real claude at once), then
// records the switch, and a turn runs on the new account's fresh token.
func TestTokenCustodySwitchToAnExpiredLogin(t *testing.T) {
	t.Parallel()
	oa := fakeoauth.Start(t, time.Hour)
	px := oa.Proxy(t, fakeoauth.ClaudeTokenHost)
	r := newCustodyRigFor(t, "claude", func(_ *turnRig, setup map[string]any) {
		setup["env"] = claudeProxyEnv(setup["env"].([]any), px)
	})
	addCustodyLogin(t, castCLI(t, r), oa, "claude")
	gb := oa.Login()
	login, err := claude.Credential{}.Apply([]byte(custodySetups["claude"].login),
		custody.Grant{Access: gb.Access, Refresh: gb.Refresh, Expires: time.Now().Add(-time.Hour)})
	must(t, err)
	c := castCLI(t, r)
	addAccount(c, "claude", "cl-b", string(login))
	c.must("account", "use", "cl-b", "--agent", "claude")
	testharness.WaitFor(t, 60*time.Second, "the node switched to cl-b", func() bool {
		return strings.Contains(r.node.Output(), `"msg":"fleet credential written","node":"worker","agent":"claude","account":"cl-b"`)
	})
	liveTurn(t, r, oa, "claude", "", "MARK-X1", gb.Access)
}
