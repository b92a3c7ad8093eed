package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
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
	oa := fakeoauth.Start(t, time.Hour)
	px := oa.Proxy(t, fakeoauth.ClaudeTokenHost)
	r := newCustodyRigFor(t, "claude", func(_ *turnRig, setup map[string]any) {
		env := slices.DeleteFunc(setup["env"].([]any), func(kv any) bool { return strings.HasPrefix(kv.(string), "ANTHROPIC_API_KEY=") })
		for _, kv := range px.Env() {
			env = append(env, kv)
		}
		setup["env"] = env
	})
	g := oa.Login()
	login, err := claude.Credential{}.Apply([]byte(`{"claudeAiOauth":{"accessToken":"x","scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`),
		custody.Grant{Access: g.Access, Refresh: g.Refresh, Expires: g.ExpiresAt})
	must(t, err)
	addAccount(castCLI(t, r), "claude", "cl", string(login))

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
