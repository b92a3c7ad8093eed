package oidcauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/oidcauth"
	"github.com/cast-dev/cast/internal/testharness"
)

func TestConfigValidate(t *testing.T) {
	ok := oidcauth.DefaultConfig()
	ok.Issuer, ok.ClientID = "https://accounts.example.com", "cast"
	for _, tc := range []struct {
		name string
		edit func(*oidcauth.Config)
		want string // "" for valid
	}{
		{"off", func(c *oidcauth.Config) { c.Issuer, c.ClientID = "", "" }, ""},
		{"https", func(*oidcauth.Config) {}, ""},
		{"http on loopback", func(c *oidcauth.Config) { c.Issuer = "http://127.0.0.1:5556/dex" }, ""},
		{"http elsewhere", func(c *oidcauth.Config) { c.Issuer = "http://accounts.example.com" }, "must be https"},
		{"not a URL", func(c *oidcauth.Config) { c.Issuer = "accounts.example.com" }, "must be an https URL"},
		{"query", func(c *oidcauth.Config) { c.Issuer = "https://a.example.com/?x=1" }, "must be an https URL"},
		{"no client id", func(c *oidcauth.Config) { c.ClientID = "" }, "needs --oidc-client-id"},
		{"client id without issuer", func(c *oidcauth.Config) { c.Issuer = "" }, "need --oidc-issuer"},
		{"no username claim", func(c *oidcauth.Config) { c.UsernameClaim = "" }, "--oidc-username-claim"},
		{"admin group without groups claim", func(c *oidcauth.Config) { c.AdminGroup, c.GroupsClaim = "admins", "" }, "--oidc-groups-claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	cfg := oidcauth.DefaultConfig()
	cfg.Issuer, cfg.ClientID, cfg.AdminGroup = iss.URL, "cast", "cast-admins"
	v := oidcauth.New(cfg, zaptest.NewLogger(t))
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(edit func(map[string]any)) map[string]any {
		c := iss.Claims("alice@example.com", "cast", time.Hour)
		if edit != nil {
			edit(c)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		token  string
		want   authz.Principal
		reason string // a refusal's
		says   string
	}{
		{"valid", iss.Token(t, claims(nil)), authz.Principal{Role: authz.User, Name: "alice@example.com"}, "", ""},
		{"admin group", iss.Token(t, claims(func(c map[string]any) { c["groups"] = []string{"dev", "cast-admins"} })),
			authz.Principal{Role: authz.Admin, Name: "alice@example.com"}, "", ""},
		{"one group as a string", iss.Token(t, claims(func(c map[string]any) { c["groups"] = "cast-admins" })),
			authz.Principal{Role: authz.Admin, Name: "alice@example.com"}, "", ""},
		{"other groups", iss.Token(t, claims(func(c map[string]any) { c["groups"] = []string{"cast-admins-not"} })),
			authz.Principal{Role: authz.User, Name: "alice@example.com"}, "", ""},
		{"audience among several", iss.Token(t, claims(func(c map[string]any) { c["aud"] = []string{"other", "cast"} })),
			authz.Principal{Role: authz.User, Name: "alice@example.com"}, "", ""},
		{"expired", iss.Token(t, iss.Claims("alice@example.com", "cast", -time.Hour)), authz.Principal{}, errs.ReasonOIDCExpired, "expired at"},
		{"wrong audience", iss.Token(t, iss.Claims("alice@example.com", "kubernetes", time.Hour)), authz.Principal{}, errs.ReasonOIDCInvalid, `expected audience "cast"`},
		{"wrong issuer", iss.Token(t, claims(func(c map[string]any) { c["iss"] = "https://evil.example.com" })), authz.Principal{}, errs.ReasonOIDCInvalid, "different provider"},
		{"forged: another key, same kid", testharness.SignJWT(t, other, iss.Kid, claims(nil)), authz.Principal{}, errs.ReasonOIDCInvalid, "failed to verify signature"},
		{"unsigned", testharness.UnsignedJWT(t, claims(nil)), authz.Principal{}, errs.ReasonOIDCInvalid, "malformed jwt"},
		{"signature cut off", strings.TrimRight(iss.Token(t, claims(nil)), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), authz.Principal{}, errs.ReasonOIDCInvalid, ""},
		{"no email", iss.Token(t, claims(func(c map[string]any) { delete(c, "email") })), authz.Principal{}, errs.ReasonOIDCClaim, `no "email" claim`},
		{"email not a string", iss.Token(t, claims(func(c map[string]any) { c["email"] = 7 })), authz.Principal{}, errs.ReasonOIDCClaim, `no "email" claim`},
		{"email unverified", iss.Token(t, claims(func(c map[string]any) { c["email_verified"] = false })), authz.Principal{}, errs.ReasonOIDCClaim, "not verified"},
		{"invalid name", iss.Token(t, claims(func(c map[string]any) { c["email"] = "alice smith@example.com" })), authz.Principal{}, errs.ReasonOIDCClaim, "malformed"},
		{"name read as a flag", iss.Token(t, claims(func(c map[string]any) { c["email"] = "-alice@example.com" })), authz.Principal{}, errs.ReasonOIDCClaim, "read as a flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), tc.token)
			if tc.reason == "" {
				if err == nil && p.Expires.IsZero() {
					t.Error("the principal does not carry the token's exp")
				}
				p.Expires = time.Time{}
				if err != nil || p != tc.want {
					t.Errorf("got %v %v, want %v", p, err, tc.want)
				}
				return
			}
			e, ok := errs.As(err)
			if !ok || e.Kind != errs.KindUnauthenticated || e.Reason != tc.reason || !strings.Contains(e.Msg, tc.says) {
				t.Errorf("got %v %v, want UNAUTHENTICATED %s saying %q", p, err, tc.reason, tc.says)
			}
		})
	}
}

// Another claim names the user when configured so; its value is checked
// the same way.
func TestUsernameClaim(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	cfg := oidcauth.DefaultConfig()
	cfg.Issuer, cfg.ClientID, cfg.UsernameClaim = iss.URL, "cast", "preferred_username"
	v := oidcauth.New(cfg, zaptest.NewLogger(t))
	c := iss.Claims("alice@example.com", "cast", time.Hour)
	c["preferred_username"] = "alice"
	if p, err := v.Verify(context.Background(), iss.Token(t, c)); err != nil || p.String() != "user:alice" {
		t.Errorf("preferred_username: %v %v", p, err)
	}
	delete(c, "preferred_username")
	if _, err := v.Verify(context.Background(), iss.Token(t, c)); !errs.HasReason(err, errs.ReasonOIDCClaim) {
		t.Errorf("without preferred_username: %v", err)
	}
}

// An issuer that cannot be reached makes OIDC calls UNAVAILABLE (not a
// refusal of the token).
func TestIssuerUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	cfg := oidcauth.DefaultConfig()
	cfg.Issuer, cfg.ClientID = url, "cast"
	v := oidcauth.New(cfg, zaptest.NewLogger(t))
	_, err = v.Verify(context.Background(), "a.b.c")
	if e, ok := errs.As(err); !ok || e.Kind != errs.KindUnavailable || !strings.Contains(e.Msg, url) {
		t.Errorf("got %v, want UNAVAILABLE naming %s", err, url)
	}
}
