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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/client"
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
	t.Parallel()
	oa := fakeoauth.Start(t, time.Hour)
	r, _ := newCustodyRig(t, oa)
	g := addCustodyLogin(t, castCLI(t, r), oa, "codex")

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
	r := newCustodyRigFor(t, "codex", func(r *turnRig, setup map[string]any) {
		setup["env"] = custodySetups["codex"].prepare(t, oa, r.fake.URL, r.homes["codex"], setup["env"].([]any))
	})
	return r, agenttest.NativeHome(r.homes["codex"], "codex")
}

// custodySetups are, per agent custody covers, how a node's agent setup
// (its home and env) reaches the fake provider oa, and a login of a new
// token family at oa in the agent's file format.
var custodySetups = map[string]struct {
	prepare func(t *testing.T, oa *fakeoauth.Server, fakeURL, home string, env []any) []any
	login   string // the credential file Apply fills in
}{
	// Codex: ChatGPT mode, the token endpoint overridden.
	"codex": {
		prepare: func(t *testing.T, oa *fakeoauth.Server, fakeURL, home string, env []any) []any {
			agenttest.CodexChatGPT(t, agenttest.NativeHome(home, "codex"), fakeURL)
			return append(env, "CODEX_REFRESH_TOKEN_URL_OVERRIDE="+oa.URL+fakeoauth.TokenPath)
		},
		login: `{"OPENAI_API_KEY":null,"tokens":{"id_token":"","access_token":"x","refresh_token":"","account_id":"acct"}}`,
	},
	// Claude: no API key, platform.claude.com reached through a test proxy.
	"claude": {
		prepare: func(t *testing.T, oa *fakeoauth.Server, _, _ string, env []any) []any {
			return claudeProxyEnv(env, oa.Proxy(t, fakeoauth.ClaudeTokenHost))
		},
		login: `{"claudeAiOauth":{"accessToken":"x","scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`,
	},
}

// newCustodyRigFor is a turn rig for agent whose control plane and node
// run with --token-custody, the node's agent setup changed by edit. The
// node's custodian refreshes a token 5 s after it is issued.
// The node is marked for custody (markCustodian).
func newCustodyRigFor(t *testing.T, agent string, edit func(r *turnRig, setup map[string]any)) *turnRig {
	t.Helper()
	return newCustodyRigMarked(t, agent, true, edit)
}

// newCustodyRigMarked is newCustodyRigFor with the node marked for
// custody or not.
func newCustodyRigMarked(t *testing.T, agent string, mark bool, edit func(r *turnRig, setup map[string]any)) *turnRig {
	t.Helper()
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) { c.TokenCustody = true }, agent)
	editAgentSetup(t, r, agent, func(setup map[string]any) { edit(r, setup) })
	r.node.Kill()
	if mark {
		markCustodian(t, r, "worker")
	}
	r.nodeArgs = append(r.nodeArgs, "--token-custody", "--custody-interval", "300ms", "--custody-margin", "59m55s")
	r.startNode()
	return r
}

// A login custody does not hold (an API key: nothing to refresh) is
// copied into the store as before, with --token-custody on both sides.
func TestTokenCustodyCopiesWhatItDoesNotHold(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	for _, agent := range []string{"claude", "codex"} {
		t.Run(agent, func(t *testing.T) { twoNodesCustodianKilled(t, agent) })
	}
}

func twoNodesCustodianKilled(t *testing.T, agent string) {
	oa := fakeoauth.Start(t, time.Hour)
	r := newCustodyRigFor(t, agent, func(r *turnRig, setup map[string]any) {
		setup["env"] = custodySetups[agent].prepare(t, oa, r.fake.URL, r.homes[agent], setup["env"].([]any))
	})
	home2, env2 := agenttest.NodeEnv(t, agent, r.fake.URL)
	env2any := make([]any, len(env2))
	for i, kv := range env2 {
		env2any[i] = kv
	}
	cfg2 := filepath.Join(t.TempDir(), "agents.json")
	b, _ := json.Marshal(map[string]any{agent: map[string]any{"bin": agenttest.Bin(t, agent), "home": home2,
		"env": custodySetups[agent].prepare(t, oa, r.fake.URL, home2, env2any)}})
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
	markCustodian(t, r, "second")

	g := addCustodyLogin(t, castCLI(t, r), oa, agent)

	f, err := codecs.Credential(agent)
	must(t, err)
	stores := map[string]string{"worker": filepath.Join(agenttest.NativeHome(r.homes[agent], agent), f.File()),
		"second": filepath.Join(agenttest.NativeHome(home2, agent), f.File())}
	access := func(node string) string {
		b, err := os.ReadFile(stores[node])
		if err != nil {
			return ""
		}
		tok, err := f.Parse(b)
		if err != nil {
			return ""
		}
		if tok.HasRefresh {
			t.Fatalf("%s's shared %s holds a refresh token", node, f.File())
		}
		return tok.AccessID
	}
	first := custody.Fingerprint(g.Access)
	refreshed := func(node string) bool {
		return strings.Contains(procs[node].Output(), "custody: refreshed through the CLI")
	}
	testharness.WaitFor(t, 60*time.Second, "a custodian refreshed and both stores have its token", func() bool {
		return (refreshed("worker") || refreshed("second")) && access("worker") != first && access("second") != first && access("worker") != ""
	})
	if refreshed("worker") && refreshed("second") {
		t.Fatalf("two nodes refreshed one login\nworker:\n%s\nsecond:\n%s",
			custodyLines(procs["worker"].Output()), custodyLines(procs["second"].Output()))
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
	liveTurn(t, r, oa, agent, other, "MARK-F1", g.Access)
}

// custodyLines are a node's log lines about custody and its connection,
// to tell a handover (a lapsed connection lease) from two custodians.
func custodyLines(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "custody") || strings.Contains(l, "connect") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// liveTurn runs a session's turn with marker on node ("" for any) and
// checks it ran on a live access token other than stale and that no
// family is revoked.
func liveTurn(t *testing.T, r *turnRig, oa *fakeoauth.Server, agent, node, marker, stale string) {
	t.Helper()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: agent, Node: node, Cwd: t.TempDir(), Text: "custody " + marker})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	bearer := bearerOf(r, marker)
	if ok, why := oa.Valid(bearer); !ok || bearer == stale {
		t.Fatalf("turn %s ran on %q: %s", marker, custody.Fingerprint(bearer), why)
	}
	if rv := oa.Revoked(); len(rv) > 0 {
		t.Fatalf("family revoked: %v", rv)
	}
}

// addCustodyLogin logs in at oa (a new token family) and adds that login
// of agent as fleet account "cl" with the real cast CLI.
func addCustodyLogin(t *testing.T, c cli, oa *fakeoauth.Server, agent string) fakeoauth.Grant {
	t.Helper()
	g := oa.Login()
	f, err := codecs.Credential(agent)
	must(t, err)
	login, err := f.Apply([]byte(custodySetups[agent].login),
		custody.Grant{Access: g.Access, Refresh: g.Refresh, IDToken: g.IDToken, Issued: g.IssuedAt, Expires: g.ExpiresAt})
	must(t, err)
	addAccount(c, agent, "cl", string(login))
	return g
}

// markCustodian lets node hold fleet logins: `cast node label NODE
// cast.dev/custodian=true`, as an admin would.
func markCustodian(t *testing.T, r *turnRig, node string) {
	t.Helper()
	castCLI(t, r).must("node", "label", node, custody.MarkLabel+"="+custody.MarkValue)
}

// Only a node an admin marked holds a fleet login, on the two-node rig
// with Codex logged in with ChatGPT on both nodes: while neither is marked
// both are refused the election and the whole credential with the reason
// and what to do, and take the access token only; once build1 is marked
// it is elected and refreshes while the laptop is still refused, and once
// unmarked it gives the login up. The control plane's audit log says
// which node held which login from when to when. Before, any joined node
// elected itself and read the refresh token.
func TestTokenCustodyOnlyOnMarkedNodes(t *testing.T) {
	t.Parallel()
	oa := fakeoauth.Start(t, time.Hour)
	r := newTwoNodeRigWith(t, twoNodeOpts{
		cpArgs:   []string{"--token-custody", "--log-format", "json"},
		nodeArgs: []string{"--log-level", "debug", "--fleet-accounts", "--token-custody", "--custody-interval", "300ms", "--custody-margin", "59m55s"},
		agents:   map[string][]string{"laptop": {"codex"}, "build1": {"codex"}},
		edit: func(r *twoNodeRig, node, agent string, setup map[string]any) {
			setup["env"] = custodySetups[agent].prepare(t, oa, r.fake.URL, r.agentHomes[node][agent], setup["env"].([]any))
		},
	})
	g := addCustodyLogin(t, r.admin, oa, "codex")
	refused := func(node, when string) {
		t.Helper()
		want := "node " + node + " may not hold fleet logins: it lacks the admin label cast.dev/custodian=true; an admin marks a custodian with `cast node label " + node + " cast.dev/custodian=true`"
		for _, op := range []castv1.CustodyOp{castv1.CustodyOp_CUSTODY_OP_ELECT, castv1.CustodyOp_CUSTODY_OP_GET} {
			_, err := r.c.Nodes.Custody(context.Background(), &castv1.CustodyRequest{Node: node, Agent: "codex", Account: "cl", Op: op})
			st, _ := status.FromError(err)
			if st.Code() != codes.PermissionDenied || st.Message() != want || client.ReasonOf(err) != custody.ReasonNotMarked {
				t.Fatalf("%s, %s %v: got %v, want PERMISSION_DENIED %s %q", when, node, op, err, custody.ReasonNotMarked, want)
			}
		}
	}
	store := func(node string) string {
		return filepath.Join(agenttest.NativeHome(r.agentHomes[node]["codex"], "codex"), "auth.json")
	}

	for _, node := range []string{"laptop", "build1"} {
		refused(node, "unmarked")
		testharness.WaitFor(t, 60*time.Second, "unmarked "+node+" told it is no custodian", func() bool {
			return strings.Contains(r.procs[node].Output(), "custody: not a custodian node")
		})
		testharness.WaitFor(t, 30*time.Second, node+"'s store given the access token", func() bool {
			b, err := os.ReadFile(store(node))
			return err == nil && strings.Contains(string(b), g.Access)
		})
	}
	if oa.Refreshes() != 0 || len(custodyAudit(r, "custody held", "")) != 0 {
		t.Fatalf("an unmarked node held the login (refreshes %d)", oa.Refreshes())
	}
	if _, _, code := r.admin.run("node", "label", "build1", "custodian"); code != 2 {
		t.Fatalf("a label that is neither KEY=VALUE nor KEY- exited %d, want 2", code)
	}

	if out := r.admin.must("node", "label", "build1", "cast.dev/custodian=true"); out != "node build1: cast.dev/custodian=true\n" {
		t.Fatalf("cast node label said %q", out)
	}
	testharness.WaitFor(t, 90*time.Second, "marked build1 elected and refreshing", func() bool {
		return oa.Refreshes() > 0 && len(custodyAudit(r, "custody held", "build1")) > 0
	})
	held := custodyAudit(r, "custody held", "build1")[0]
	refused("laptop", "build1 marked")
	if others := len(custodyAudit(r, "custody held", "")); others != 1 {
		t.Fatalf("%d holdings in the audit log; want build1's alone", others)
	}
	for _, node := range []string{"laptop", "build1"} {
		if b, err := os.ReadFile(store(node)); err != nil || strings.Contains(string(b), g.Refresh) {
			t.Fatalf("%s's shared auth.json holds the refresh token (%v)", node, err)
		}
	}
	if !strings.Contains(r.admin.must("nodes"), "cast.dev/custodian=true") {
		t.Fatal("cast nodes does not show the mark")
	}

	if out := r.admin.must("node", "label", "build1", "cast.dev/custodian-"); out != "node build1 has no admin labels\n" {
		t.Fatalf("cast node label ... KEY- said %q", out)
	}
	testharness.WaitFor(t, 30*time.Second, "the audit log ends build1's holding", func() bool {
		return len(custodyAudit(r, "custody ended", "build1")) > 0
	})
	ended := custodyAudit(r, "custody ended", "build1")[0]
	if ended["since"] != held["since"] || ended["until"] == nil {
		t.Fatalf("custody ended %v does not close custody held %v", ended, held)
	}
	refused("build1", "unmarked again")
}

// custodyAudit returns the control plane's audit lines msg of node's
// holding of codex/cl (node "": any node's).
func custodyAudit(r *twoNodeRig, msg, node string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(r.cp.Output(), "\n") {
		var f map[string]any
		if json.Unmarshal([]byte(line), &f) != nil || f["msg"] != msg {
			continue
		}
		if (node == "" || f["node"] == node) && f["agent"] == "codex" && f["account"] == "cl" && f["since"] != nil {
			out = append(out, f)
		}
	}
	return out
}
