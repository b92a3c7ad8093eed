package custody_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/fence"
)

// claudeLogin is a Claude config folder for a subscription login (no API
// key) whose token endpoint, https://platform.claude.com/v1/oauth/token,
// is the fake provider behind the test proxy; the model is the fake model.
func claudeLogin(t *testing.T, fm *fakemodel.Server, px *fakeoauth.Proxy) (cred string, env []string) {
	t.Helper()
	home, env := agenttest.Env(t, "claude", fm.URL)
	env = append(agents.WithoutEnv(env, "ANTHROPIC_API_KEY"), px.Env()...)
	return filepath.Join(agenttest.NativeHome(home, "claude"), claude.Credential{}.File()), env
}

// tokenPosts counts the refreshes the proxy passed to the fake provider.
func tokenPosts(px *fakeoauth.Proxy) int {
	n := 0
	for _, l := range px.Log() {
		if l == "POST "+fakeoauth.ClaudeTokenHost+fakeoauth.TokenPath {
			n++
		}
	}
	return n
}

// lastBearer is the credential the fake model's last turn came with.
func lastBearer(fm *fakemodel.Server) string {
	turns := fm.Turns()
	if len(turns) == 0 {
		return ""
	}
	return strings.TrimPrefix(turns[len(turns)-1].Header.Get("Authorization"), "Bearer ")
}

// The real Claude refreshes as custodian without a model turn and runs
// turns elsewhere on the access token alone: node n1's custody runs
// `claude mcp list` on the account's .credentials.json in its custody
// folder, and Claude posts the refresh to platform.claude.com, which the
// test proxy serves from the fake provider; n1 stores what Claude wrote.
// A second refresh presents the rotated refresh token, so the stored one is
// the live one. Node n2's Claude gets the file without a refresh token and
// answers a turn with the custodian's access token (the fake model sees
// it), calling no token endpoint. No family is revoked.
func TestCustodianRefreshesThroughRealClaude(t *testing.T) {
	d := newDay(t, "claude", custodial) // etcd, vault, fake provider
	d.fake.SetClock(time.Now)
	px := d.fake.Proxy(t, fakeoauth.ClaudeTokenHost)
	fm := fakemodel.Start(t)
	ctx := context.Background()
	raw := d.login()
	if _, err := d.v.Add(ctx, "claude", "C", raw); err != nil {
		t.Fatal(err)
	}
	_, n1Env := claudeLogin(t, fm, px)
	n1, err := custody.NewNode(custody.NodeConfig{Name: "n1", Dir: t.TempDir(), Margin: 2 * lifetime},
		d.v, codecs.Credential, claude.Refresher{Bin: agenttest.Bin(t, "claude"), Env: n1Env}, zaptest.NewLogger(t))
	must(t, err)
	if who, err := d.v.Elect(ctx, "claude", "C", "n1", fence.Lease(d.nodes[0].lease)); err != nil || who != "n1" {
		t.Fatalf("elect n1: %q %v", who, err)
	}
	for i := 1; i <= 2; i++ {
		before, _, _ := d.v.Get(ctx, "claude", "C")
		did, err := n1.Custody(ctx, "claude", "C")
		if err != nil || !did {
			t.Fatalf("refresh %d through claude: did=%v err=%v (proxy saw %q)", i, did, err, px.Log())
		}
		stored, tok, err := d.v.Get(ctx, "claude", "C")
		must(t, err)
		if string(stored) == string(before) || !tok.HasRefresh {
			t.Fatalf("refresh %d: the rotated credential was not stored", i)
		}
	}
	if n := tokenPosts(px); n != 2 || d.fake.Refreshes() != 2 {
		t.Fatalf("claude posted %d refreshes through the proxy, the provider answered %d; want 2", n, d.fake.Refreshes())
	}
	if len(fm.Turns()) != 0 {
		t.Fatal("the custodian's refresh ran a model turn")
	}
	if rv := d.fake.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}

	n2Cred, n2Env := claudeLogin(t, fm, px)
	n2, err := custody.NewNode(custody.NodeConfig{Name: "n2", Dir: t.TempDir()}, d.v, codecs.Credential, nil, zaptest.NewLogger(t))
	must(t, err)
	supplied, err := n2.Supply(ctx, "claude", "C", n2Cred)
	must(t, err)
	onDisk, _ := os.ReadFile(n2Cred)
	var file struct {
		OAuth map[string]any `json:"claudeAiOauth"`
	}
	must(t, json.Unmarshal(onDisk, &file))
	if _, ok := file.OAuth["refreshToken"]; ok {
		t.Fatal("a non-custodian node got the refresh token")
	}
	if fi, _ := os.Stat(n2Cred); fi.Mode().Perm() != 0o600 {
		t.Fatalf(".credentials.json mode %v", fi.Mode().Perm())
	}
	access, _ := file.OAuth["accessToken"].(string)
	if custody.Fingerprint(access) != supplied.AccessID {
		t.Fatal("n2's file does not hold the access token custody supplied")
	}
	res := agenttest.MustRun(t, ctx, agenttest.Bin(t, "claude"), []string{"-p", "custody MARK-N2"}, n2Env, t.TempDir())
	if !strings.Contains(res.Stdout, "MARK-N2") {
		t.Fatalf("claude on n2 did not answer: %s %s", res.Stdout, res.Stderr)
	}
	if lastBearer(fm) != access {
		t.Fatal("n2's turn did not use the access token custody supplied")
	}
	if ok, why := d.fake.Valid(access); !ok {
		t.Fatalf("n2's turn token: %s", why)
	}
	if n := tokenPosts(px); n != 2 || d.fake.Refreshes() != 2 {
		t.Fatalf("claude on n2 called the token endpoint (%d posts)", n)
	}
	if after, _ := os.ReadFile(n2Cred); string(after) != string(onDisk) {
		t.Fatal("claude on n2 rewrote its credential file")
	}
	if rv := d.fake.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
}

// The control case: the copying cast does without custody. Two nodes get
// the same stored .credentials.json, refresh token included, and each real
// Claude refreshes it inside its turn (it expires within 5 minutes). The
// second one presents the refresh token the first already spent, and the
// provider revokes the family, logging both out.
func TestCopiedClaudeLoginRevokesTheFamily(t *testing.T) {
	oa := fakeoauth.Start(t, time.Hour)
	px := oa.Proxy(t, fakeoauth.ClaudeTokenHost)
	fm := fakemodel.Start(t)
	g := oa.Login()
	stored, err := claude.Credential{}.Apply([]byte(`{"claudeAiOauth":{"accessToken":"x","scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`),
		custody.Grant{Access: g.Access, Refresh: g.Refresh, Expires: time.Now().Add(2 * time.Minute)})
	must(t, err)
	for i, node := range []string{"n1", "n2"} {
		cred, env := claudeLogin(t, fm, px)
		must(t, os.WriteFile(cred, stored, 0o600)) // the copy `cast account use` wrote
		res := agenttest.Run(t, context.Background(), agenttest.Bin(t, "claude"), []string{"-p", "copied MARK-" + node}, env, t.TempDir())
		// At least one refresh per node: a refused refresh (the reused
		// token, on n2) may be retried by the CLI.
		if tokenPosts(px) < i+1 {
			t.Fatalf("claude on %s did not refresh the copied login (proxy saw %q; %s)", node, px.Log(), res.Stderr)
		}
	}
	if rv := oa.Revoked(); len(rv) != 1 || !strings.Contains(rv[0], "reused") {
		t.Fatalf("two copies of one login refreshed without revoking the family: %v", rv)
	}
	if ok, _ := oa.Valid(g.Access); ok {
		t.Fatal("the revoked family's access token still works")
	}
}

// What claude.Refresher rests on, measured on the real CLI for
// docs/token-custody.md: `claude mcp list` refreshes a login expiring
// within 5 minutes (or expired) without a model turn, and not one with
// 10 minutes left or with the claude.ai connectors switched off. (`-p
// /status` refreshed in some runs and not in others: the lookup runs in
// the background there and races the exit.)
func TestClaudeRefreshesWithoutATurn(t *testing.T) {
	oa := fakeoauth.Start(t, time.Hour)
	px := oa.Proxy(t, fakeoauth.ClaudeTokenHost)
	fm := fakemodel.Start(t)
	for _, tc := range []struct {
		name    string
		args    []string
		left    time.Duration
		env     []string
		refresh bool
	}{
		{"mcp list, 2m left", []string{"mcp", "list"}, 2 * time.Minute, nil, true},
		{"mcp list, expired", []string{"mcp", "list"}, -time.Hour, nil, true},
		{"mcp list, 10m left", []string{"mcp", "list"}, 10 * time.Minute, nil, false},
		{"mcp list, connectors off", []string{"mcp", "list"}, 2 * time.Minute, []string{"ENABLE_CLAUDEAI_MCP_SERVERS=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := oa.Login()
			raw, err := claude.Credential{}.Apply([]byte(`{"claudeAiOauth":{"accessToken":"x","scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`),
				custody.Grant{Access: g.Access, Refresh: g.Refresh, Expires: time.Now().Add(tc.left)})
			must(t, err)
			cred, env := claudeLogin(t, fm, px)
			must(t, os.WriteFile(cred, raw, 0o600))
			posts, turns := tokenPosts(px), len(fm.Turns())
			agenttest.MustRun(t, context.Background(), agenttest.Bin(t, "claude"), tc.args, append(env, tc.env...), t.TempDir())
			after, _ := os.ReadFile(cred)
			rt, _ := claude.Credential{}.RefreshToken(after)
			if got := tokenPosts(px) > posts; got != tc.refresh || (rt != g.Refresh) != tc.refresh {
				t.Fatalf("refreshed=%v (file rotated: %v), want %v; proxy saw %q", got, rt != g.Refresh, tc.refresh, px.Log())
			}
			if len(fm.Turns()) != turns {
				t.Fatal("a model turn ran")
			}
		})
	}
	if rv := oa.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
}
