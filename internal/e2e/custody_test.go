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
	"github.com/cast-dev/cast/internal/agents/codecs"
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
	r, _ := newCustodyRig(t, oa)
	g := addCodexLogin(t, r, oa)

	custodyTurns(t, r, oa, "codex", g, "MARK-K1", "MARK-K2")
	// What custody supplies is never backed up (the store held no login
	// of the user's to keep).
	backups, _ := os.ReadDir(filepath.Join(r.nodeArgs[indexOf(r.nodeArgs, "--data-dir")+1], "credential-backups", "codex"))
	if len(backups) > 0 {
		t.Fatalf("%d backups of supplied access tokens", len(backups))
	}
}

// custodyTurns runs a session's turn on r's node for each marker, each
// once the custodian has supplied a newer access token than the last
// turn's (the first: newer than login's) to agent's shared store, which
// never holds a refresh token. Each turn must run on that newer, live
// token; no family is revoked, the provider saw a refresh for each, and
// no token reaches the node's log.
func custodyTurns(t *testing.T, r *turnRig, oa *fakeoauth.Server, agent string, login fakeoauth.Grant, markers ...string) {
	t.Helper()
	f, err := codecs.Credential(agent)
	must(t, err)
	store := filepath.Join(agenttest.NativeHome(r.homes[agent], agent), f.File())
	seen := []string{custody.Fingerprint(login.Access)}
	for _, marker := range markers {
		testharness.WaitFor(t, 90*time.Second, "the custodian's refreshed token in the store", func() bool {
			raw, err := os.ReadFile(store)
			if err != nil {
				return false
			}
			tok, err := f.Parse(raw)
			if err == nil && tok.HasRefresh {
				t.Fatalf("the agent's shared %s holds a refresh token", f.File())
			}
			return err == nil && !slices.Contains(seen, tok.AccessID)
		})
		sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: agent, Cwd: t.TempDir(), Text: "custody " + marker})
		must(t, err)
		r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
		bearer := bearerOf(r, marker)
		if bearer == "" || slices.Contains(seen, custody.Fingerprint(bearer)) {
			t.Fatalf("turn %s did not run on a newly refreshed access token", marker)
		}
		if ok, why := oa.Valid(bearer); !ok {
			t.Fatalf("turn %s token: %s", marker, why)
		}
		seen = append(seen, custody.Fingerprint(bearer))
		if strings.Contains(r.node.Output(), bearer) {
			t.Fatal("a token reached the node's log")
		}
	}
	if rv := oa.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
	if n := oa.Refreshes(); n < len(markers) {
		t.Fatalf("%d refreshes", n)
	}
	logs := r.node.Output()
	if strings.Contains(logs, login.Access) || strings.Contains(logs, login.Refresh) {
		t.Fatal("a token reached the node's log")
	}
	if !strings.Contains(logs, "custody: refreshed through the CLI") {
		t.Fatal("the node did not log its refreshes")
	}
}

// newCustodyRig is a turn rig whose control plane and node run with
// --token-custody, and whose Codex is logged in with ChatGPT against the
// fake token endpoint oa. The node's custodian refreshes a token 5 s
// after it is issued.
func newCustodyRig(t *testing.T, oa *fakeoauth.Server) (*turnRig, string) {
	t.Helper()
	var codexHome string
	r := newCustodyRigFor(t, "codex", func(r *turnRig, setup map[string]any) {
		codexHome = filepath.Join(r.homes["codex"], ".codex")
		agenttest.CodexChatGPT(t, codexHome, r.fake.URL)
		setup["env"] = append(setup["env"].([]any), "CODEX_REFRESH_TOKEN_URL_OVERRIDE="+oa.URL+fakeoauth.TokenPath)
	})
	return r, codexHome
}

// newCustodyRigFor is a turn rig for agent whose control plane and node
// run with --token-custody, the node's agent setup changed by edit. The
// node's custodian refreshes a token 5 s after it is issued.
func newCustodyRigFor(t *testing.T, agent string, edit func(r *turnRig, setup map[string]any)) *turnRig {
	t.Helper()
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) { c.TokenCustody = true }, agent)
	editAgentSetup(t, r, agent, func(setup map[string]any) { edit(r, setup) })
	r.node.Kill()
	r.nodeArgs = append(r.nodeArgs, "--token-custody", "--custody-interval", "300ms", "--custody-margin", "59m55s")
	r.startNode()
	return r
}

// A login custody does not hold (an API key: nothing to refresh) is
// copied into the store as before, with --token-custody on both sides.
func TestTokenCustodyCopiesWhatItDoesNotHold(t *testing.T) {
	r, _ := newCustodyRig(t, fakeoauth.Start(t, time.Hour))
	const key = "sk-cx-NOT-IN-CUSTODY"
	addAccount(castCLI(t, r), "codex", "k", `{"OPENAI_API_KEY":"`+key+`"}`)
	waitStore(t, r, "codex", key) // copied
	if !strings.Contains(r.node.Output(), "custody does not hold this account") {
		t.Fatal("the node did not say why it copied")
	}
}

// Two node processes share a Codex fleet login under custody: exactly one
// refreshes it, each store holds only access tokens; the custodian is
// killed with -9 (mid-refresh or not: it refreshes every few seconds) and
// restarted, as a supervisor would. Custody passes on or comes back, the
// login keeps rotating, turns on the other node run on live tokens, and
// the provider never revokes the family.
func TestTokenCustodyTwoNodesCustodianKilled(t *testing.T) {
	oa := fakeoauth.Start(t, time.Hour)
	r, codexHome := newCustodyRig(t, oa)
	home2, env2 := agenttest.NodeEnv(t, "codex", r.fake.URL)
	codexHome2 := filepath.Join(home2, ".codex")
	agenttest.CodexChatGPT(t, codexHome2, r.fake.URL)
	cfg2 := filepath.Join(t.TempDir(), "agents.json")
	b, _ := json.Marshal(map[string]any{"codex": map[string]any{"bin": agenttest.Bin(t, "codex"), "home": home2,
		"env": append(env2, "CODEX_REFRESH_TOKEN_URL_OVERRIDE="+oa.URL+fakeoauth.TokenPath)}})
	must(t, os.WriteFile(cfg2, b, 0o600))
	args2 := slices.Clone(r.nodeArgs)
	args2[indexOf(args2, "--data-dir")+1] = t.TempDir()
	args2[indexOf(args2, "--name")+1] = "second"
	args2[indexOf(args2, "--agents-config")+1] = cfg2
	nodeBin := filepath.Join(testharness.Binaries(t), "node")
	procs := map[string]*testharness.Proc{"worker": r.node, "second": testharness.StartProcEnv(t, nil, nodeBin, args2...)}
	argsOf := map[string][]string{"worker": r.nodeArgs, "second": args2}
	testharness.WaitFor(t, 30*time.Second, "both nodes connected", func() bool {
		resp, err := r.c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		n := 0
		for _, nd := range resp.GetNodes() {
			if nd.Connected {
				n++
			}
		}
		return err == nil && n == 2
	})

	g := addCodexLogin(t, r, oa)

	stores := map[string]string{"worker": filepath.Join(codexHome, "auth.json"), "second": filepath.Join(codexHome2, "auth.json")}
	access := func(node string) string {
		b, _ := os.ReadFile(stores[node])
		var v struct {
			Tokens map[string]string `json:"tokens"`
		}
		_ = json.Unmarshal(b, &v)
		if v.Tokens["refresh_token"] != "" {
			t.Fatalf("%s's shared auth.json holds a refresh token", node)
		}
		return v.Tokens["access_token"]
	}
	refreshed := func(node string) bool {
		return strings.Contains(procs[node].Output(), "custody: refreshed through the CLI")
	}
	testharness.WaitFor(t, 60*time.Second, "a custodian refreshed and both stores have its token", func() bool {
		return (refreshed("worker") || refreshed("second")) && access("worker") != g.Access && access("second") != g.Access && access("worker") != ""
	})
	if refreshed("worker") && refreshed("second") {
		t.Fatal("two nodes refreshed one login")
	}
	custodian, other := "worker", "second"
	if refreshed("second") {
		custodian, other = "second", "worker"
	}

	before := oa.Refreshes()
	procs[custodian].Kill()
	procs[custodian] = testharness.StartProcEnv(t, nil, nodeBin, argsOf[custodian]...)
	seen := access(other)
	testharness.WaitFor(t, 90*time.Second, "the login rotating again after the kill", func() bool {
		a := access(other)
		return oa.Refreshes() >= before+2 && a != seen && a != ""
	})
	if rv := oa.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "codex", Node: other, Cwd: t.TempDir(), Text: "custody MARK-F1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	bearer := bearerOf(r, "MARK-F1")
	if ok, why := oa.Valid(bearer); !ok || bearer == g.Access {
		t.Fatalf("the turn after the kill ran on %q: %s", custody.Fingerprint(bearer), why)
	}
	if rv := oa.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
}

// addCodexLogin logs in at oa (a new token family) and adds that ChatGPT
// login as fleet account cx with `cast account add`.
func addCodexLogin(t *testing.T, r *turnRig, oa *fakeoauth.Server) fakeoauth.Grant {
	t.Helper()
	g := oa.Login()
	login, err := codex.Credential{}.Apply([]byte(`{"OPENAI_API_KEY":null,"tokens":{"id_token":"","access_token":"x","refresh_token":"","account_id":"acct"}}`),
		custody.Grant{Access: g.Access, Refresh: g.Refresh, IDToken: g.IDToken, Issued: g.IssuedAt, Expires: g.ExpiresAt})
	must(t, err)
	addAccount(castCLI(t, r), "codex", "cx", string(login))
	return g
}
