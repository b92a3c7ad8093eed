package controlplane_test

import (
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// OIDC ID tokens from a fake issuer on 127.0.0.1, over real gRPC: a
// valid one is a user confined to its own sessions, the admin group makes
// an admin, and expired, wrong-audience, wrong-issuer, forged and unsigned
// tokens, and tokens without a valid user claim, are refused with a
// reason. Cast tokens keep working beside them.
func TestOIDCUsers(t *testing.T) {
	t.Parallel()
	iss := testharness.StartOIDCIssuer(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID, c.Auth.OIDC.AdminGroup = iss.URL, "cast", "cast-admins"
	})
	addr, ctx := srv.Addr(), ctxT(t)
	admin := testharness.Dial(t, addr) // a cast token
	testharness.StartNode(t, addr, "n1", nil)
	waitConnected(t, admin, "n1", true)

	idToken := func(email string, edit func(map[string]any)) string {
		c := iss.Claims(email, "cast", time.Hour)
		if edit != nil {
			edit(c)
		}
		return iss.Token(t, c)
	}
	alice := testharness.DialAs(t, addr, idToken("alice@example.com", nil))
	bob := testharness.DialAs(t, addr, idToken("bob@example.com", func(c map[string]any) { c["groups"] = []string{"dev"} }))
	carol := testharness.DialAs(t, addr, idToken("carol@example.com", func(c map[string]any) { c["groups"] = []string{"dev", "cast-admins"} }))

	for _, w := range []struct {
		c    *client.Client
		want string
	}{{alice, "user:alice@example.com"}, {bob, "user:bob@example.com"}, {carol, "admin:carol@example.com"}} {
		if got, err := w.c.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil || got.Principal != w.want {
			t.Errorf("whoami: %v %v, want %s", got, err, w.want)
		}
	}

	mine, err := alice.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil || mine.Creator != "user:alice@example.com" {
		t.Fatalf("alice creates a session: %v %v", mine, err)
	}
	bobs, err := bob.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := alice.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Id != mine.Id {
		t.Errorf("alice lists %v %v, want only %s", list.GetSessions(), err, mine.Id)
	}
	_, err = alice.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: bobs.Id})
	wantDenied(t, "alice reads bob's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = bob.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: mine.Id, Text: "hi"})
	wantDenied(t, "bob prompts alice's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = alice.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{})
	wantDenied(t, "an OIDC user lists accounts", err, codes.PermissionDenied, errs.ReasonPermissionDenied)
	// No cast credential to bind a certificate to: a clear refusal.
	if _, err := alice.Auth.IssueCertificate(ctx, &castv1.IssueCertificateRequest{}); status.Code(err) != codes.FailedPrecondition ||
		client.ReasonOf(err) != errs.ReasonCertNoCredential || !strings.Contains(err.Error(), "OIDC") {
		t.Errorf("certificate for an OIDC user: %v", err)
	}
	// The admin group: everything, every session.
	if _, err := carol.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: bobs.Id}); err != nil {
		t.Errorf("carol (admin group) reads bob's session: %v", err)
	}
	if _, err := carol.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{}); err != nil {
		t.Errorf("carol (admin group) lists accounts: %v", err)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	good := iss.Claims("mallory@example.com", "cast", time.Hour)
	withIss := iss.Claims("mallory@example.com", "cast", time.Hour)
	withIss["iss"] = "https://accounts.example.com"
	noEmail := iss.Claims("mallory@example.com", "cast", time.Hour)
	delete(noEmail, "email")
	for _, tc := range []struct {
		name, token, reason, says string
	}{
		{"expired", iss.Token(t, iss.Claims("mallory@example.com", "cast", -time.Hour)), errs.ReasonOIDCExpired, "expired at"},
		{"wrong audience", iss.Token(t, iss.Claims("mallory@example.com", "other-app", time.Hour)), errs.ReasonOIDCInvalid, "expected audience"},
		{"wrong issuer", iss.Token(t, withIss), errs.ReasonOIDCInvalid, "different provider"},
		{"forged", testharness.SignJWT(t, other, iss.Kid, good), errs.ReasonOIDCInvalid, "failed to verify signature"},
		{"unsigned", testharness.UnsignedJWT(t, good), errs.ReasonOIDCInvalid, "malformed jwt"},
		{"no user claim", iss.Token(t, noEmail), errs.ReasonOIDCClaim, `no "email" claim`},
	} {
		_, err := testharness.DialAs(t, addr, tc.token).Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
		wantDenied(t, tc.name, err, codes.Unauthenticated, tc.reason)
		if !strings.Contains(status.Convert(err).Message(), tc.says) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.says)
		}
	}
	if _, err := admin.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{}); err != nil {
		t.Errorf("a cast admin token beside OIDC: %v", err)
	}
}
