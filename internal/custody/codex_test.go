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

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/fence"
)

// chatgptHome is a Codex home logged in with ChatGPT whose token endpoint
// is the fake provider.
func chatgptHome(t *testing.T, fm *fakemodel.Server, oa *fakeoauth.Server) (home string, env []string) {
	t.Helper()
	h, env := agenttest.Env(t, "codex", fm.URL)
	home = agenttest.NativeHome(h, "codex")
	agenttest.CodexChatGPT(t, home, fm.URL)
	return home, append(env, "CODEX_REFRESH_TOKEN_URL_OVERRIDE="+oa.URL+fakeoauth.TokenPath)
}

// The real Codex refreshes as custodian and runs turns elsewhere on the
// access token alone: node n1's custody runs `codex app-server` on the
// account's auth.json in its custody folder, Codex rotates the token at
// the fake provider, and n1 stores what Codex wrote; node n2's Codex gets
// auth.json with no refresh token and answers a turn with the new access
// token, calling no token endpoint. A second refresh presents the rotated
// refresh token, so the stored one is the live one; no family is revoked.
func TestCustodianRefreshesThroughRealCodex(t *testing.T) {
	d := newDay(t, "codex", custodial) // etcd, vault, fake provider
	d.fake.SetClock(time.Now)
	fm := fakemodel.Start(t)
	ctx := context.Background()
	raw := d.login()
	if _, err := d.v.Add(ctx, "codex", "C", raw); err != nil {
		t.Fatal(err)
	}
	custodyDir := t.TempDir()
	n1Home, n1Env := chatgptHome(t, fm, d.fake)
	cfg, _ := os.ReadFile(filepath.Join(n1Home, "config.toml"))
	must(t, os.MkdirAll(filepath.Join(custodyDir, "codex", "C"), 0o700))
	must(t, os.WriteFile(filepath.Join(custodyDir, "codex", "C", "config.toml"), cfg, 0o600))
	n1, err := custody.NewNode(custody.NodeConfig{Name: "n1", Dir: custodyDir, Margin: 2 * lifetime},
		d.v, codecs.Credential, codex.Refresher{Bin: agenttest.Bin(t, "codex"), Env: n1Env}, zaptest.NewLogger(t))
	must(t, err)
	before, _, _ := d.v.Get(ctx, "codex", "C")
	if who, err := d.v.Elect(ctx, "codex", "C", "n1", fence.Lease(d.nodes[0].lease)); err != nil || who != "n1" {
		t.Fatalf("elect n1: %q %v", who, err)
	}

	for i := 1; i <= 2; i++ {
		did, err := n1.Custody(ctx, "codex", "C")
		if err != nil || !did {
			t.Fatalf("refresh %d through codex: did=%v err=%v", i, did, err)
		}
	}
	if n := d.fake.Refreshes(); n < 2 {
		t.Fatalf("codex refreshed %d times, want 2", n)
	}
	if rv := d.fake.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
	stored, tok, err := d.v.Get(ctx, "codex", "C")
	must(t, err)
	if string(stored) == string(before) || !tok.HasRefresh {
		t.Fatal("the rotated credential was not stored")
	}

	n2Home, n2Env := chatgptHome(t, fm, d.fake)
	n2, err := custody.NewNode(custody.NodeConfig{Name: "n2", Dir: t.TempDir()}, d.v, codecs.Credential, nil, zaptest.NewLogger(t))
	must(t, err)
	if _, err := n2.Supply(ctx, "codex", "C", filepath.Join(n2Home, "auth.json")); err != nil {
		t.Fatal(err)
	}
	onDisk, _ := os.ReadFile(filepath.Join(n2Home, "auth.json"))
	var auth struct {
		Tokens map[string]string `json:"tokens"`
	}
	must(t, json.Unmarshal(onDisk, &auth))
	if auth.Tokens["refresh_token"] != "" {
		t.Fatal("a non-custodian node got the refresh token")
	}
	if fi, _ := os.Stat(filepath.Join(n2Home, "auth.json")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("auth.json mode %v", fi.Mode().Perm())
	}
	refreshes := d.fake.Refreshes()
	res := agenttest.MustRun(t, ctx, agenttest.Bin(t, "codex"), []string{"exec", "--skip-git-repo-check", "custody MARK-N2"}, n2Env, t.TempDir())
	if !strings.Contains(res.Stdout, "MARK-N2") {
		t.Fatalf("codex on n2 did not answer: %s", res.Stdout)
	}
	var bearer string
	for _, r := range fm.Turns() {
		bearer = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if bearer != auth.Tokens["access_token"] {
		t.Fatal("n2's turn did not use the access token custody supplied")
	}
	if ok, why := d.fake.Valid(bearer); !ok {
		t.Fatalf("n2's turn token: %s", why)
	}
	if d.fake.Refreshes() != refreshes {
		t.Fatal("codex on n2 called the token endpoint")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
