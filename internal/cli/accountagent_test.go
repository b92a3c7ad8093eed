package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// writeLogins writes a claude and a codex credentials file (`cast account
// add --credentials`) and returns their paths by agent.
func writeLogins(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"claude": fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-AGENTACCESS","refreshToken":"sk-ant-ort01-AGENTREFRESH","expiresAt":%d,"scopes":["user:inference"]}}`, time.Now().Add(time.Hour).UnixMilli()),
		"codex":  `{"OPENAI_API_KEY":null,"tokens":{"id_token":"a.b.c","access_token":"eyJ.AGENTACCESS.sig","refresh_token":"rt-AGENTREFRESH","account_id":"acct"},"last_refresh":"2026-01-01T00:00:00Z"}`,
	}
	paths := map[string]string{}
	for agent, body := range files {
		paths[agent] = filepath.Join(dir, agent+".json")
		if err := os.WriteFile(paths[agent], []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// `cast account rm|use|policy NAME` without --agent take the agent of the
// one account so named (approve|deny the agent whose choice waits); a name several agents' accounts share, or none
// has, is a usage mistake (exit 2) that lists the agents or says so.
func TestAccountAgentInferred(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	addr := srv.Addr()
	creds := writeLogins(t)
	for _, acc := range [][2]string{{"claude", "a1"}, {"claude", "w1"}, {"claude", "shared"}, {"codex", "shared"}} {
		mustMain(t, addr, "account", "add", acc[1], "--agent", acc[0], "--credentials", creds[acc[0]])
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "w1", "off"}, "claude account w1: policy off"},
		{[]string{"use", "w1"}, "claude account w1"},
		{[]string{"rm", "a1"}, "removed claude account a1"},
	} {
		if out := mustMain(t, addr, append([]string{"account"}, tc.args...)...); !strings.Contains(out, tc.want) {
			t.Errorf("account %q: %q, want %q", tc.args, out, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"rm", "shared"}, []string{`"shared"`, "claude, codex", "--agent"}},
		{[]string{"policy", "shared", "off"}, []string{`"shared"`, "claude, codex", "--agent"}},
		{[]string{"rm", "nosuch"}, []string{`no fleet account is named "nosuch"`, "cast account ls"}},
	} {
		_, errOut, code := runMain(t, addr, append([]string{"account"}, tc.args...)...)
		if code != 2 || !saysAll(errOut, tc.want) {
			t.Errorf("account %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	// approve|deny without --agent answer the one agent whose choice
	// waits (TestFleetClaudeAskPolicy answers a real one so); with none
	// waiting they say so.
	for _, verb := range []string{"approve", "deny"} {
		_, errOut, code := runMain(t, addr, "account", verb)
		if code != 1 || !strings.Contains(errOut, "no agent is waiting for an account choice") {
			t.Errorf("account %s with no choice waiting: exit %d, stderr %q", verb, code, errOut)
		}
	}
}
