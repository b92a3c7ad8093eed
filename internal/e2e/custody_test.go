package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Token custody end to end with the real Codex (control plane and node
// with --token-custody): a ChatGPT login added as a fleet account stays
// with the custodian node, which refreshes it through `codex app-server`
// against a fake token endpoint that rotates refresh tokens and revokes
// the family on reuse; the agent's shared auth.json only ever holds the
// access token, and turns run on each newer access token. No family is
// revoked and no token reaches the node's log.
func TestTokenCustodyCodex(t *testing.T) {
	oa := fakeoauth.Start(t, time.Hour)
	r, codexHome := newCustodyRig(t, oa)
	g := oa.Login()
	login, err := codex.Credential{}.Apply([]byte(`{"OPENAI_API_KEY":null,"tokens":{"id_token":"","access_token":"x","refresh_token":"","account_id":"acct"}}`),
		custody.Grant{Access: g.Access, Refresh: g.Refresh, IDToken: g.IDToken, Issued: g.IssuedAt, Expires: g.ExpiresAt})
	must(t, err)
	credPath := filepath.Join(t.TempDir(), "auth.json")
	must(t, os.WriteFile(credPath, login, 0o600))
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	c.must("account", "add", "cx", "--agent", "codex", "--credentials", credPath)

	store := filepath.Join(codexHome, "auth.json")
	storeAccess := func() string {
		b, err := os.ReadFile(store)
		if err != nil {
			return ""
		}
		var v struct {
			Tokens map[string]string `json:"tokens"`
		}
		if json.Unmarshal(b, &v) != nil {
			return ""
		}
		if v.Tokens["refresh_token"] != "" {
			t.Fatal("the agent's shared auth.json holds a refresh token")
		}
		return v.Tokens["access_token"]
	}
	var seen []string
	turn := func(marker string) string {
		t.Helper()
		testharness.WaitFor(t, 90*time.Second, "the custodian's refreshed token in the store", func() bool {
			a := storeAccess()
			return a != "" && a != g.Access && !slices.Contains(seen, a)
		})
		sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "codex", Cwd: t.TempDir(), Text: "custody " + marker})
		must(t, err)
		r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
		bearer := bearerOf(r, marker)
		if bearer == "" || bearer == g.Access || slices.Contains(seen, bearer) {
			t.Fatalf("turn %s did not run on a newly refreshed access token", marker)
		}
		if ok, why := oa.Valid(bearer); !ok {
			t.Fatalf("turn %s token: %s", marker, why)
		}
		seen = append(seen, bearer)
		return bearer
	}
	turn("MARK-K1")
	turn("MARK-K2")
	if rv := oa.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
	if n := oa.Refreshes(); n < 2 {
		t.Fatalf("%d refreshes", n)
	}
	logs := r.node.Output()
	for _, s := range append(seen, g.Access, g.Refresh) {
		if strings.Contains(logs, s) {
			t.Fatal("a token reached the node's log")
		}
	}
	if !strings.Contains(logs, "custody: refreshed through the CLI") {
		t.Fatal("the node did not log its refreshes")
	}
	// What custody supplies is never backed up (the store held no login
	// of the user's to keep).
	backups, _ := os.ReadDir(filepath.Join(r.nodeArgs[indexOf(r.nodeArgs, "--data-dir")+1], "credential-backups", "codex"))
	if len(backups) > 0 {
		t.Fatalf("%d backups of supplied access tokens", len(backups))
	}
}

// newCustodyRig is a turn rig whose control plane and node run with
// --token-custody, and whose Codex is logged in with ChatGPT against the
// fake token endpoint oa. The node's custodian refreshes a token 5 s
// after it is issued.
func newCustodyRig(t *testing.T, oa *fakeoauth.Server) (*turnRig, string) {
	t.Helper()
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) { c.TokenCustody = true }, "codex")
	codexHome := filepath.Join(r.homes["codex"], ".codex")
	agenttest.CodexChatGPT(t, codexHome, r.fake.URL)
	cfgPath := r.nodeArgs[indexOf(r.nodeArgs, "--agents-config")+1]
	var setups map[string]map[string]any
	b, err := os.ReadFile(cfgPath)
	must(t, err)
	must(t, json.Unmarshal(b, &setups))
	setups["codex"]["env"] = append(setups["codex"]["env"].([]any), "CODEX_REFRESH_TOKEN_URL_OVERRIDE="+oa.URL+fakeoauth.TokenPath)
	b, _ = json.Marshal(setups)
	must(t, os.WriteFile(cfgPath, b, 0o600))
	r.node.Kill()
	r.nodeArgs = append(r.nodeArgs, "--token-custody", "--custody-interval", "300ms", "--custody-margin", "59m55s")
	r.startNode()
	return r, codexHome
}

// A login custody does not hold (an API key: nothing to refresh) is
// copied into the store as before, with --token-custody on both sides.
func TestTokenCustodyCopiesWhatItDoesNotHold(t *testing.T) {
	r, codexHome := newCustodyRig(t, fakeoauth.Start(t, time.Hour))
	const key = "sk-cx-NOT-IN-CUSTODY"
	credPath := filepath.Join(t.TempDir(), "auth.json")
	must(t, os.WriteFile(credPath, []byte(`{"OPENAI_API_KEY":"`+key+`"}`), 0o600))
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	c.must("account", "add", "k", "--agent", "codex", "--credentials", credPath)
	testharness.WaitFor(t, 30*time.Second, "the node copied the API key into auth.json", func() bool {
		b, err := os.ReadFile(filepath.Join(codexHome, "auth.json"))
		return err == nil && strings.Contains(string(b), key)
	})
	if !strings.Contains(r.node.Output(), "custody does not hold this account") {
		t.Fatal("the node did not say why it copied")
	}
}
