package controlplane_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// codexLogin is a ChatGPT auth.json issued at iat.
func codexLogin(access, refresh string, iat time.Time) []byte {
	claims, _ := json.Marshal(map[string]int64{"iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix()})
	jwt := "e30." + base64.RawURLEncoding.EncodeToString(claims) + ".sig-" + access
	return fmt.Appendf(nil, `{"OPENAI_API_KEY":null,"tokens":{"id_token":"e30.e30.x","access_token":%q,"refresh_token":%q,"account_id":"a"},"last_refresh":%q}`,
		jwt, refresh, iat.UTC().Format(time.RFC3339))
}

// The Custody RPC's guards: the access token (no refresh token) for the
// active account to a connected node, the login only to the custodian,
// no credential that is not newer, no inactive account; off without
// --token-custody.
func TestCustodyRPCGuards(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, func(c *controlplane.Config) { c.TokenCustody = true })
	ctx := ctxT(t)
	now := time.Now()
	for _, acc := range []string{"cx", "cy"} {
		if _, err := e.admin.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: acc, Agent: "codex", Credential: codexLogin("at-"+acc, "rt-SECRET-"+acc, now)}); err != nil {
			t.Fatal(err)
		}
	}
	call := func(c *client.Client, node string, op castv1.CustodyOp, acc string, cred []byte) (*castv1.CustodyResponse, error) {
		return c.Nodes.Custody(ctx, &castv1.CustodyRequest{Node: node, Agent: "codex", Account: acc, Op: op, Credential: cred})
	}
	resp, err := call(e.n1, "n1", castv1.CustodyOp_CUSTODY_OP_ACCESS, "cx", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := (codex.Credential{}).Parse(resp.Credential); err != nil || tok.HasRefresh {
		t.Fatalf("ACCESS handed out a refresh token (%v)", err)
	}
	// Only a node an admin marked may hold the login; n1 may not mark
	// itself, nor may a user.
	for _, op := range []castv1.CustodyOp{castv1.CustodyOp_CUSTODY_OP_ELECT, castv1.CustodyOp_CUSTODY_OP_GET, castv1.CustodyOp_CUSTODY_OP_BEGIN_REFRESH} {
		_, err := call(e.n1, "n1", op, "cx", nil)
		wantDenied(t, "unmarked n1 "+op.String(), err, codes.PermissionDenied, custody.ReasonNotMarked)
	}
	mark := &castv1.LabelNodeRequest{Name: "n1", Set: map[string]string{custody.MarkLabel: custody.MarkValue}}
	for who, c := range map[string]*client.Client{"n1": e.n1, "alice": e.alice} {
		_, err := c.Nodes.LabelNode(ctx, mark)
		wantDenied(t, who+" marks n1", err, codes.PermissionDenied, errs.ReasonPermissionDenied)
	}
	markNode(t, e.admin, "n1")
	if resp, err = call(e.n1, "n1", castv1.CustodyOp_CUSTODY_OP_ELECT, "cx", nil); err != nil || resp.Custodian != "n1" {
		t.Fatalf("elect: %v %v", resp, err)
	}
	if resp, err = call(e.n1, "n1", castv1.CustodyOp_CUSTODY_OP_GET, "cx", nil); err != nil {
		t.Fatal(err)
	}
	if tok, _ := (codex.Credential{}).Parse(resp.Credential); !tok.HasRefresh {
		t.Fatal("the custodian did not get the login")
	}

	testharness.StartNode(t, e.addr, "n2", nil)
	waitConnected(t, e.admin, "n2", true)
	markNode(t, e.admin, "n2")
	for _, op := range []castv1.CustodyOp{castv1.CustodyOp_CUSTODY_OP_GET, castv1.CustodyOp_CUSTODY_OP_BEGIN_REFRESH} {
		_, err := call(e.admin, "n2", op, "cx", nil)
		wantDenied(t, "n2 "+op.String(), err, codes.PermissionDenied, custody.ReasonNotCustodian)
	}
	if resp, _ := call(e.admin, "n2", castv1.CustodyOp_CUSTODY_OP_ELECT, "cx", nil); resp.GetCustodian() != "n1" {
		t.Fatalf("n2 took custody from a live n1: %v", resp)
	}
	_, err = call(e.n1, "n1", castv1.CustodyOp_CUSTODY_OP_PUT, "cx", codexLogin("at-old", "rt-old", now.Add(-time.Hour)))
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != custody.ReasonNotNewer {
		t.Fatalf("an older login was stored: %v", err)
	}
	_, err = call(e.admin, "n2", castv1.CustodyOp_CUSTODY_OP_PUT, "cy", codexLogin("at-new", "rt-new", now.Add(time.Hour)))
	wantDenied(t, "n2 stores an inactive account", err, codes.FailedPrecondition, errs.ReasonAccountNotActive)
	_, err = call(e.n1, "n1", castv1.CustodyOp_CUSTODY_OP_ACCESS, "cy", nil)
	wantDenied(t, "ACCESS to an inactive account", err, codes.FailedPrecondition, errs.ReasonAccountNotActive)

	// `cast account rm` drops the login from custody: the same name added
	// again with an older login is taken, not refused as not newer.
	if _, err := e.admin.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: "cy", Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Accounts.DeleteAccount(ctx, &castv1.DeleteAccountRequest{Name: "cx", Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	old := codexLogin("at-readded", "rt-readded", now.Add(-2*time.Hour))
	if _, err := e.admin.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: "cx", Agent: "codex", Credential: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: "cx", Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	resp, err = call(e.n1, "n1", castv1.CustodyOp_CUSTODY_OP_ACCESS, "cx", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := (codex.Credential{}).Parse(old)
	if got, _ := (codex.Credential{}).Parse(resp.Credential); got.AccessID != want.AccessID {
		t.Fatal("the removed account's login stayed in custody")
	}

	off := newAuthEnv(t, nil)
	_, err = call(off.n1, "n1", castv1.CustodyOp_CUSTODY_OP_ACCESS, "cx", nil)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("custody off: %v", err)
	}
}

// markNode lets node hold fleet logins (cast.dev/custodian=true).
func markNode(t *testing.T, admin *client.Client, node string) {
	t.Helper()
	resp, err := admin.Nodes.LabelNode(ctxT(t), &castv1.LabelNodeRequest{Name: node, Set: map[string]string{custody.MarkLabel: custody.MarkValue}})
	if err != nil || !custody.Marked(resp.Labels) {
		t.Fatalf("mark %s: %v %v", node, resp, err)
	}
}

// LabelNode refuses what it cannot store: an unknown node, a malformed
// key or value, nothing to do, a key both set and removed; ListNodes shows
// the admin labels, and removing a key drops it.
func TestLabelNode(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	admin := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, admin, "n1", true)
	ctx := ctxT(t)
	bad := []struct {
		name  string
		req   *castv1.LabelNodeRequest
		code  codes.Code
		field string
	}{
		{"unknown node", &castv1.LabelNodeRequest{Name: "nope", Set: map[string]string{"a": "b"}}, codes.NotFound, ""},
		{"key with space", &castv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"a b": "c"}}, codes.InvalidArgument, "set"},
		{"upper-case prefix", &castv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"Cast.dev/x": "c"}}, codes.InvalidArgument, "set"},
		{"value read as a flag", &castv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"a": "-x"}}, codes.InvalidArgument, "set[a]"},
		{"nothing", &castv1.LabelNodeRequest{Name: "n1"}, codes.InvalidArgument, ""},
		{"set and removed", &castv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"a": "b"}, Remove: []string{"a"}}, codes.InvalidArgument, ""},
	}
	for _, tc := range bad {
		_, err := admin.Nodes.LabelNode(ctx, tc.req)
		if tc.field != "" {
			wantRefusal(t, tc.name, err, tc.field)
		} else if status.Code(err) != tc.code {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.code)
		}
	}
	if _, err := admin.Nodes.LabelNode(ctx, &castv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"cast.dev/custodian": "true", "rack": "r1"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Nodes.LabelNode(ctx, &castv1.LabelNodeRequest{Name: "n1", Remove: []string{"rack", "absent"}})
	if err != nil || len(resp.Labels) != 1 || resp.Labels["cast.dev/custodian"] != "true" {
		t.Fatalf("after removing rack: %v %v", resp, err)
	}
	list, err := admin.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
	if err != nil || len(list.Nodes) != 1 || list.Nodes[0].AdminLabels["cast.dev/custodian"] != "true" {
		t.Fatalf("ListNodes: %v %v", list, err)
	}
	// Each call is bounded, and so is their sum: calls of 40 labels each
	// grew one etcd value until etcd refused it.
	batch := func(from int) map[string]string {
		set := map[string]string{}
		for i := from; i < from+40; i++ {
			set[fmt.Sprintf("rack-%d", i)] = "r"
		}
		return set
	}
	if _, err := admin.Nodes.LabelNode(ctx, &castv1.LabelNodeRequest{Name: "n1", Set: batch(0)}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.Nodes.LabelNode(ctx, &castv1.LabelNodeRequest{Name: "n1", Set: batch(40)})
	wantRefusal(t, "82 labels on one node", err, "set")
	list, err = admin.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
	if err != nil || len(list.Nodes[0].AdminLabels) != 41 {
		t.Fatalf("after a refused change the node has %d labels (%v), want the 41 it had", len(list.GetNodes()[0].GetAdminLabels()), err)
	}
}

// FetchCredential, the copy a node takes of an account custody does not
// hold, never hands out a login custody holds: every connected node gets
// a grant with each switch, so before, any of them (an unmarked laptop, a
// node started with --token-custody=false, or one whose ACCESS ran before
// `cast account add` put the login in custody) got the refresh token
// that only the custodian may hold, and its CLI refreshing with it (spent
// once the custodian refreshed) revoked the family. It gets custody's
// newest access token without the refresh token instead.
func TestFetchCredentialKeepsTheRefreshTokenInCustody(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TokenCustody = true })
	c := testharness.Dial(t, srv.Addr())
	cmds := rawNode(t, c, "nr")
	waitConnected(t, c, "nr", true)
	ctx := ctxT(t)
	login := codexLogin("at-cx", "rt-SECRET-cx", time.Now())
	if _, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: "cx", Agent: "codex", Credential: login}); err != nil {
		t.Fatal(err)
	}
	sc := nextCommand(t, cmds, func(cmd *castv1.Command) bool { return cmd.GetSetCredential() != nil }).GetSetCredential()
	resp, err := c.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "nr", Agent: "codex", Account: "cx", Grant: sc.Grant})
	if err != nil {
		t.Fatal(err)
	}
	got, err := (codex.Credential{}).Parse(resp.Credential)
	want, _ := (codex.Credential{}).Parse(login)
	if err != nil || got.HasRefresh || got.AccessID != want.AccessID || strings.Contains(string(resp.Credential), "rt-SECRET") {
		t.Fatalf("FetchCredential of a login in custody: refresh token handed out %v, access %q want %q (%v)", got.HasRefresh, got.AccessID, want.AccessID, err)
	}
	// An API key is nothing custody holds: it is copied as it is.
	key := []byte(`{"OPENAI_API_KEY":"sk-key"}`)
	if _, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: "ck", Agent: "codex", Credential: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: "ck", Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	sc = nextCommand(t, cmds, func(cmd *castv1.Command) bool { return cmd.GetSetCredential().GetAccount() == "ck" }).GetSetCredential()
	resp, err = c.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "nr", Agent: "codex", Account: "ck", Grant: sc.Grant})
	if err != nil || string(resp.Credential) != string(key) {
		t.Fatalf("an API key: %q %v", resp.GetCredential(), err)
	}
}

// `cast account add` puts a login in custody before the account is
// stored, so before anything can activate it: the Put itself (the agent's
// first account, or a new login for the active one), `cast account use`,
// or a switch on a usage limit. Before, the account was stored and
// activated first, and a node that the SetCredential reached in between
// asked custody for the access token, heard NOT_IN_CUSTODY and copied the
// stored login, refresh token included. The etcd revisions give the order
// each write happened in. A login custody does not cover (an API key)
// is stored and activated as before, with nothing in custody.
func TestAccountAddTakesCustodyBeforeActivating(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.TokenCustody, c.EtcdEndpoints = true, []string{ep}
	})
	c := testharness.Dial(t, srv.Addr())
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	ctx := ctxT(t)
	modRev := func(key string) int64 {
		t.Helper()
		resp, err := etcd.Get(ctx, store.DefaultPrefix+key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return 0
		}
		return resp.Kvs[0].ModRevision
	}
	now := time.Now()
	for _, tc := range []struct {
		name, account string
		cred          []byte
		use           bool // activated by `cast account use`, not by the add
		inCustody     bool
	}{
		{name: "the first login", account: "cx", cred: codexLogin("at-cx1", "rt-cx1", now), inCustody: true},
		{name: "a newer login for the active account", account: "cx", cred: codexLogin("at-cx2", "rt-cx2", now.Add(time.Minute)), inCustody: true},
		{name: "a login activated later", account: "cy", cred: codexLogin("at-cy", "rt-cy", now), use: true, inCustody: true},
		{name: "an API key", account: "ck", cred: []byte(`{"OPENAI_API_KEY":"sk-key"}`), use: true},
	} {
		if _, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: tc.account, Agent: "codex", Credential: tc.cred}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// Read before `use`, whose activation rewrites the account record.
		stored := modRev("accounts/codex/" + tc.account)
		if tc.use {
			if _, err := c.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: tc.account, Agent: "codex"}); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		held, activated := modRev("custody/codex/"+tc.account+"/cred"), modRev("activeaccounts/codex")
		switch {
		case !tc.inCustody && held != 0:
			t.Errorf("%s: custody holds it", tc.name)
		case tc.inCustody && held == 0:
			t.Errorf("%s: custody does not hold it", tc.name)
		case tc.inCustody && (held > stored || held > activated):
			t.Errorf("%s: custody took the login at revision %d, after the account was stored (%d) or activated (%d)", tc.name, held, stored, activated)
		}
		if act, _ := c.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{Agent: "codex"}); !slices.ContainsFunc(act.GetAccounts(), func(a *castv1.Account) bool { return a.Name == tc.account && a.Active }) {
			t.Errorf("%s: %s is not active", tc.name, tc.account)
		}
	}
}

// A custodian that restarts after `cast account rm` reports the removed
// account's last login from its custody folder and deletes its copy when
// custody answers NOT_IN_CUSTODY (custody.Node.Reconcile). The PUT guard
// refused it first as not the active account (a removed account never
// is), so the node kept that login, refresh token and all, and warned at
// every start. An account custody holds that is not active is still
// refused as such.
func TestCustodyPutOfARemovedAccountIsNotInCustody(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TokenCustody = true })
	c := testharness.Dial(t, srv.Addr())
	rawNode(t, c, "nr")
	waitConnected(t, c, "nr", true)
	markNode(t, c, "nr")
	ctx := ctxT(t)
	now := time.Now()
	for _, acc := range []string{"cx", "cy", "cz"} {
		if _, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: acc, Agent: "codex", Credential: codexLogin("at-"+acc, "rt-"+acc, now)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: "cy", Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Accounts.DeleteAccount(ctx, &castv1.DeleteAccountRequest{Name: "cx", Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		account, reason string
		code            codes.Code
	}{
		{"cx", custody.ReasonNotInCustody, codes.NotFound},
		{"cz", errs.ReasonAccountNotActive, codes.FailedPrecondition},
	} {
		_, err := c.Nodes.Custody(ctx, &castv1.CustodyRequest{Node: "nr", Agent: "codex", Account: tc.account, Op: castv1.CustodyOp_CUSTODY_OP_PUT,
			Credential: codexLogin("at-later", "rt-later", now.Add(time.Hour))})
		wantDenied(t, "PUT "+tc.account, err, tc.code, tc.reason)
	}
}
