package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/cast-dev/cast/internal/authz"
)

// IDTokens checks an ID token as the control plane checks a CLI's
// (internal/oidcauth): issuer, audience, signature, expiry, the claims
// that name the person and make an admin.
type IDTokens interface {
	Verify(ctx context.Context, raw string) (authz.Principal, error)
}

// OIDC is the browser's sign-in with the team's identity provider: the
// authorization code flow with PKCE (S256). The issuer sends the browser
// back to /auth/oidc/callback with a code only this flow's verifier can
// redeem; a cookie ties the answer to the browser that asked, so a link
// from elsewhere cannot sign a browser in as someone else.
type OIDC struct {
	Issuer, ClientID string
	// ClientSecret is for issuers that treat a web app as a confidential
	// client (env CAST_WEB_OIDC_CLIENT_SECRET); empty: a public client.
	ClientSecret string
	IDs          IDTokens
}

// flowTTL is how long a sign-in may stay at the issuer.
const flowTTL = 10 * time.Minute

// flowCookie is the name of the cookie that carries the flow's state to
// the callback at redirect (Lax: it must come back on the issuer's
// top-level redirect). The callback's port is in the name, as in
// SessionCookie's: two control planes on one host would otherwise replace
// each other's flow, and the first sign-in's callback be refused.
func flowCookie(redirect string) string {
	name := "cast_web_oidc"
	if u, err := url.Parse(redirect); err == nil {
		name += portSuffix(u.Host)
	}
	return name
}

type oidcFlow struct {
	cfg      OIDC
	redirect string
	cookie   string // flowCookie(redirect)
	logins   *Logins
	secure   bool // cookies are Secure (Handler.https)
	lg       *zap.Logger

	mu       sync.Mutex
	provider *oidc.Provider
}

// pendingFlow is a sign-in between its start and its callback, kept in
// the store (kindFlow, by the digest of its state, leased for flowTTL),
// so the callback may reach any replica behind the app's address.
type pendingFlow struct {
	Verifier string    `json:"verifier"`
	Until    time.Time `json:"until"`
	// Replaces is the hash of the session the browser held at the start,
	// ended once the sign-in succeeds: the issuer's redirect to the
	// callback is cross-site, so it does not bring the SameSite=Strict
	// session cookie.
	Replaces string `json:"replaces,omitempty"`
}

func newOIDCFlow(cfg OIDC, redirect string, logins *Logins, secure bool, lg *zap.Logger) *oidcFlow {
	return &oidcFlow{cfg: cfg, redirect: redirect, cookie: flowCookie(redirect), logins: logins, secure: secure, lg: lg}
}

// conf discovers the issuer once (again after a failure).
func (f *oidcFlow) conf(ctx context.Context) (*oauth2.Config, error) {
	f.mu.Lock()
	p := f.provider
	f.mu.Unlock()
	if p == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		if p, err = oidc.NewProvider(cctx, f.cfg.Issuer); err != nil {
			return nil, err
		}
		f.mu.Lock()
		f.provider = p
		f.mu.Unlock()
	}
	return &oauth2.Config{ClientID: f.cfg.ClientID, ClientSecret: f.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: f.redirect, Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"}}, nil
}

// start sends the browser to the issuer.
func (f *oidcFlow) start(w http.ResponseWriter, r *http.Request) {
	conf, err := f.conf(r.Context())
	if err != nil {
		f.lg.Warn("oidc discovery failed", zap.String("issuer", f.cfg.Issuer), zap.Error(err))
		http.Error(w, "the identity provider cannot be reached; try again, or use `cast web`", http.StatusBadGateway)
		return
	}
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	b, _ := json.Marshal(pendingFlow{Verifier: verifier, Until: time.Now().Add(flowTTL), Replaces: presentedSession(r, f.secure)}) // always encodes
	if err := f.logins.grants.PutWebGrant(r.Context(), kindFlow, digest(state), b, flowTTL); err != nil {
		f.lg.Warn("oidc sign-in not kept", zap.Error(err))
		http.Error(w, "the sign-in could not be started; try again", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: f.cookie, Value: state, Path: "/auth/oidc", HttpOnly: true,
		Secure: f.secure, SameSite: http.SameSiteLaxMode, MaxAge: int(flowTTL.Seconds())})
	http.Redirect(w, r, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

// callback redeems the code and signs the browser in until the ID token
// expires (at most the session lifetime).
func (f *oidcFlow) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	c, err := r.Cookie(f.cookie)
	if state == "" || err != nil || c.Value != state {
		http.Error(w, "this sign-in was not started in this browser; start again", http.StatusBadRequest)
		return
	}
	b, ok, err := f.logins.grants.TakeWebGrant(r.Context(), kindFlow, digest(state))
	if err != nil {
		f.lg.Warn("oidc sign-in not read", zap.Error(err))
		http.Error(w, "the sign-in could not be read; try again", http.StatusServiceUnavailable)
		return
	}
	var p pendingFlow
	if !ok || json.Unmarshal(b, &p) != nil || time.Now().After(p.Until) {
		http.Error(w, "this sign-in expired; start again", http.StatusBadRequest)
		return
	}
	if e := q.Get("error"); e != "" {
		http.Error(w, "the identity provider refused: "+e, http.StatusUnauthorized)
		return
	}
	conf, err := f.conf(r.Context())
	if err != nil {
		http.Error(w, "the identity provider cannot be reached", http.StatusBadGateway)
		return
	}
	tok, err := conf.Exchange(r.Context(), q.Get("code"), oauth2.VerifierOption(p.Verifier))
	if err != nil {
		f.lg.Warn("oidc code exchange failed", zap.Error(err))
		http.Error(w, "the identity provider did not redeem the code; start again", http.StatusUnauthorized)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	who, err := f.cfg.IDs.Verify(r.Context(), raw)
	if err != nil {
		f.lg.Warn("web oidc sign-in refused", zap.Error(err))
		http.Error(w, "the ID token was refused: "+err.Error(), http.StatusUnauthorized)
		return
	}
	s, err := f.logins.Grant(r.Context(), who, who.Expires)
	if err != nil {
		http.Error(w, "sign-in failed", http.StatusInternalServerError)
		return
	}
	f.lg.Info("web sign-in", zap.String("principal", who.String()), zap.String("via", "oidc"))
	f.logins.replaced(r.Context(), p.Replaces, f.lg)
	http.SetCookie(w, &http.Cookie{Name: f.cookie, Value: "", Path: "/auth/oidc", HttpOnly: true, Secure: f.secure, MaxAge: -1})
	f.logins.setSession(w, r, s, f.secure)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
