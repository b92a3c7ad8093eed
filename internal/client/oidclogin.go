package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/cast-dev/cast/internal/netaddr"
)

// `cast login` gets an OpenID Connect ID token for a context through one
// of two OAuth 2.0 grants (golang.org/x/oauth2): the device authorization
// grant (RFC 8628: the person opens the issuer's URL anywhere, enters the
// code, and the CLI, polling, receives the tokens), or the authorization
// code grant with PKCE (RFC 7636) and a loopback redirect (RFC 8252: the
// person opens the URL in a browser on this machine, and the issuer sends
// the browser back to a one-shot listener on 127.0.0.1). Either way the
// CLI receives an ID token and a refresh token. Both go in the
// context (the 0600 contexts file, written atomically); when the ID
// token nears its exp the next command trades the refresh token for a new
// pair and stores it, so a login lasts as long as the issuer's refresh
// token does. The control plane verifies the ID token (internal/oidcauth);
// the CLI checks it too before storing it, against the same discovery.

// oidcTimeout bounds one discovery or token request to the issuer.
const oidcTimeout = 30 * time.Second

// LoginScopes are asked for: an ID token, the email claim the control
// plane reads by default, groups, and a refresh token.
var LoginScopes = []string{oidc.ScopeOpenID, "email", "profile", "groups", oidc.ScopeOfflineAccess}

// LoginResult is what a login or refresh got.
type LoginResult struct {
	IDToken      string
	RefreshToken string
	Subject      string // the token's email claim, else its sub
	Expiry       time.Time
}

func oidcProvider(ctx context.Context, issuer string) (*oidc.Provider, context.Context, error) {
	if err := netaddr.CheckIssuerURL(issuer); err != nil {
		return nil, nil, err
	}
	ctx = oidc.ClientContext(ctx, &http.Client{Timeout: oidcTimeout})
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("OIDC discovery at %s: %w", issuer, err)
	}
	return p, ctx, nil
}

// deviceLogin is the device authorization grant: prompt shows the person
// where to go and the code to enter.
func deviceLogin(ctx context.Context, p *oidc.Provider, conf *oauth2.Config, issuer string, prompt func(*oauth2.DeviceAuthResponse)) (*LoginResult, error) {
	if conf.Endpoint.DeviceAuthURL == "" {
		return nil, fmt.Errorf("the issuer %s offers no device authorization endpoint; use --grant-type authcode (a browser on this machine) or a token-command helper (`cast config set-context --token-command`)", issuer)
	}
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("device authorization at %s: %w", issuer, err)
	}
	prompt(da)
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return nil, fmt.Errorf("login at %s: %w", issuer, err)
	}
	return idTokenOf(ctx, p, conf.ClientID, tok)
}

// RefreshLogin trades refresh for a new ID token (and refresh token, when
// the issuer rotates them).
func RefreshLogin(ctx context.Context, issuer, clientID, refresh string) (*LoginResult, error) {
	p, ctx, err := oidcProvider(ctx, issuer)
	if err != nil {
		return nil, err
	}
	conf := &oauth2.Config{ClientID: clientID, Endpoint: p.Endpoint(), Scopes: LoginScopes}
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: refresh}).Token()
	if err != nil {
		return nil, fmt.Errorf("refreshing the OIDC login at %s (run `cast login` again): %w", issuer, err)
	}
	res, err := idTokenOf(ctx, p, clientID, tok)
	if err == nil && res.RefreshToken == "" {
		res.RefreshToken = refresh // the issuer keeps the same one
	}
	return res, err
}

// idTokenOf checks tok's ID token as the control plane will (issuer,
// audience, signature, exp) so a bad one is not stored.
func idTokenOf(ctx context.Context, p *oidc.Provider, clientID string, tok *oauth2.Token) (*LoginResult, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the issuer answered without an ID token (is the openid scope allowed for this client?)")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: clientID}).Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("the issuer's ID token does not verify: %w", err)
	}
	var claims struct {
		Email string `json:"email"`
	}
	_ = idt.Claims(&claims)
	who := claims.Email
	if who == "" {
		who = idt.Subject
	}
	return &LoginResult{IDToken: raw, RefreshToken: tok.RefreshToken, Subject: who, Expiry: idt.Expiry}, nil
}

// oidcToken is a context's logged-in ID token, refreshed near its exp and
// stored back in the context.
type oidcToken struct {
	login      OIDCLogin
	file, name string // the contexts file and the context to update

	mu  sync.Mutex
	tok string
}

// bearerOIDC returns the Token a logged-in context sends.
func (c Context) bearerOIDC() *Token {
	ot := &oidcToken{login: *c.OIDC, file: c.file, name: c.name, tok: c.Token}
	t := NewToken("")
	t.src, t.forget = ot.get, func() {}
	return t
}

func (ot *oidcToken) get(ctx context.Context) (string, error) {
	ot.mu.Lock()
	defer ot.mu.Unlock()
	if exp := jwtExpiry(ot.tok); ot.tok != "" && (exp.IsZero() || fresh(exp, time.Now())) {
		return ot.tok, nil
	}
	if ot.login.RefreshToken == "" {
		return ot.tok, nil // expired: the control plane says so, and `cast login` renews it
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), oidcTimeout)
	defer cancel()
	if ot.file == "" {
		return ot.refresh(ctx)
	}
	// Under the contexts file's lock, reading the context again: another
	// cast process refreshing it at the same time spent the same refresh
	// token, an issuer rotating them strictly refused the second, and the
	// user had to `cast login` again. A pair another process stored
	// meanwhile is used as it is.
	var tok string
	var refreshErr error
	ran := false
	err := editConfig(ot.file, func(cfg *Config) error {
		ran = true
		c := cfg.Contexts[ot.name]
		if c == nil || c.OIDC == nil || c.OIDC.Issuer != ot.login.Issuer || c.OIDC.ClientID != ot.login.ClientID {
			// Logged in elsewhere since: refresh this process's own login,
			// storing nothing.
			tok, refreshErr = ot.refresh(ctx)
			return errKeep
		}
		if exp := jwtExpiry(c.Token); c.Token != ot.tok && c.Token != "" && !exp.IsZero() && fresh(exp, time.Now()) {
			ot.tok, ot.login.RefreshToken, tok = c.Token, c.OIDC.RefreshToken, c.Token
			return errKeep
		}
		if c.OIDC.RefreshToken != "" {
			ot.login.RefreshToken = c.OIDC.RefreshToken // maybe newer than the one this process read
		}
		if tok, refreshErr = ot.refresh(ctx); refreshErr != nil {
			return errKeep
		}
		// The issuer may have retired the old refresh token: keep the new one.
		c.Token, c.OIDC.RefreshToken = ot.tok, ot.login.RefreshToken
		return nil
	})
	switch {
	case !ran:
		// The file could not be locked or read: refresh all the same.
		fmt.Fprintf(os.Stderr, "cast: the contexts file %s could not be read to refresh the OIDC login: %v\n", ot.file, err)
		return ot.refresh(ctx)
	case refreshErr != nil:
		return "", refreshErr
	case err != nil && !errors.Is(err, errKeep):
		fmt.Fprintf(os.Stderr, "cast: the refreshed OIDC login could not be stored in %s: %v\n", ot.file, err)
	}
	return tok, nil
}

// errKeep has editConfig write nothing back.
var errKeep = errors.New("nothing to store")

// refresh gets a new ID token with the login's refresh token.
func (ot *oidcToken) refresh(ctx context.Context) (string, error) {
	res, err := RefreshLogin(ctx, ot.login.Issuer, ot.login.ClientID, ot.login.RefreshToken)
	if err != nil {
		return "", err
	}
	ot.tok, ot.login.RefreshToken = res.IDToken, res.RefreshToken
	return ot.tok, nil
}
