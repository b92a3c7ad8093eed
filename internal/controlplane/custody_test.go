package controlplane_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
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
	for _, op := range []castv1.CustodyOp{castv1.CustodyOp_CUSTODY_OP_GET, castv1.CustodyOp_CUSTODY_OP_BEGIN_REFRESH} {
		_, err := call(e.admin, "n2", op, "cx", nil)
		wantDenied(t, "n2 "+op.String(), err, codes.PermissionDenied, errs.ReasonNotOwner)
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
