package testharness

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// OIDCIssuer is a fake OpenID Connect issuer on 127.0.0.1: a discovery
// document and a JWKS with one RSA key it made, and ID tokens it signs
// with that key (RS256). Tests point a control plane's --oidc-issuer at
// URL and hand out tokens from Token. It also runs the device
// authorization grant (RFC 8628), the authorization code grant with PKCE
// (RFC 7636, S256 only) and refresh tokens for `cast login` (oidclogin.go,
// authcode.go): a test plays the person by approving the user code, or by
// opening the authorization URL with an email added (the browser).
type OIDCIssuer struct {
	URL       string
	Key       *rsa.PrivateKey
	Kid       string
	mu        sync.Mutex
	devices   map[string]*oidcDevice // by device code
	refresh   map[string]string      // refresh token -> "client\x00email"
	codes     map[string]*oidcCode   // authorization code -> its request
	serial    int
	loginTTL  time.Duration // 0: an hour
	refreshes int           // refresh grants answered
}

type oidcCode struct {
	client, redirect, challenge, email string
}

type oidcDevice struct {
	client, userCode, email string // email: "" until approved
}

// StartOIDCIssuer starts an issuer, stopped at cleanup.
func StartOIDCIssuer(t testing.TB) *OIDCIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o := &OIDCIssuer{Key: key, Kid: "k1", devices: map[string]*oidcDevice{}, refresh: map[string]string{}, codes: map[string]*oidcCode{}}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": o.URL, "jwks_uri": o.URL + "/keys",
			"authorization_endpoint": o.URL + "/auth", "token_endpoint": o.URL + "/token",
			"device_authorization_endpoint": o.URL + "/device/code",
			"response_types_supported":      []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		enc := base64.RawURLEncoding.EncodeToString
		writeJSON(w, map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "alg": "RS256", "use": "sig", "kid": o.Kid,
			"n": enc(key.N.Bytes()), "e": enc(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	mux.HandleFunc("POST /device/code", o.deviceCode)
	mux.HandleFunc("GET /device", o.approve)
	mux.HandleFunc("GET /auth", o.authorize)
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) { o.token(t, w, r) })
	return o
}

// deviceCode starts a device login for the form's client_id.
func (o *OIDCIssuer) deviceCode(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.serial++
	dc, uc := fmt.Sprintf("dc-%d", o.serial), fmt.Sprintf("CODE-%04d", o.serial)
	o.devices[dc] = &oidcDevice{client: r.PostFormValue("client_id"), userCode: uc}
	writeJSON(w, map[string]any{"device_code": dc, "user_code": uc, "verification_uri": o.URL + "/device",
		"verification_uri_complete": o.URL + "/device?user_code=" + uc, "expires_in": 300, "interval": 1})
}

// approve is the person at the verification URL: ?user_code=...&email=...
func (o *OIDCIssuer) approve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, d := range o.devices {
		if d.userCode == r.URL.Query().Get("user_code") {
			d.email = r.URL.Query().Get("email")
			fmt.Fprintln(w, "approved")
			return
		}
	}
	http.Error(w, "no such code", http.StatusNotFound)
}

// token answers the device-code and refresh-token grants: an ID token for
// the approved person, and a new refresh token each time (rotation).
func (o *OIDCIssuer) token(t testing.TB, w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	client, email := r.PostFormValue("client_id"), ""
	if id, _, ok := r.BasicAuth(); ok && client == "" {
		client = id // a public client may name itself in the header too (golang.org/x/oauth2 tries that first)
	}
	switch r.PostFormValue("grant_type") {
	case "urn:ietf:params:oauth:grant-type:device_code":
		d := o.devices[r.PostFormValue("device_code")]
		if d == nil || d.client != client {
			oauthError(w, "invalid_grant")
			return
		}
		if d.email == "" {
			oauthError(w, "authorization_pending")
			return
		}
		email = d.email
		delete(o.devices, r.PostFormValue("device_code"))
	case "authorization_code":
		c := o.codes[r.PostFormValue("code")]
		delete(o.codes, r.PostFormValue("code")) // one use, right or wrong
		if c == nil || c.client != client || c.redirect != r.PostFormValue("redirect_uri") || c.challenge != pkceS256(r.PostFormValue("code_verifier")) {
			oauthError(w, "invalid_grant")
			return
		}
		email = c.email
	case "refresh_token":
		who, ok := o.refresh[r.PostFormValue("refresh_token")]
		if !ok || !strings.HasPrefix(who, client+"\x00") {
			oauthError(w, "invalid_grant")
			return
		}
		delete(o.refresh, r.PostFormValue("refresh_token"))
		email = strings.TrimPrefix(who, client+"\x00")
		o.refreshes++
	default:
		oauthError(w, "unsupported_grant_type")
		return
	}
	ttl := o.loginTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	o.serial++
	rt := fmt.Sprintf("rt-%d", o.serial)
	o.refresh[rt] = client + "\x00" + email
	writeJSON(w, map[string]any{"access_token": fmt.Sprintf("at-%d", o.serial), "token_type": "Bearer", "expires_in": int(ttl.Seconds()),
		"refresh_token": rt, "id_token": o.Token(t, o.Claims(email, client, ttl))})
}

// authorize is the person's browser at the authorization endpoint, with
// &email=... for who approves: it sends the browser back to the client's
// loopback redirect with a one-use code bound to the PKCE challenge.
func (o *OIDCIssuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Hostname() != "127.0.0.1" || q.Get("response_type") != "code" ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
		http.Error(w, "a loopback redirect, response_type=code, an S256 challenge and a state are required", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.serial++
	code := fmt.Sprintf("ac-%d", o.serial)
	o.codes[code] = &oidcCode{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), email: q.Get("email")}
	o.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// pkceS256 is RFC 7636's S256 code challenge of verifier.
func pkceS256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func oauthError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Claims are an ID token's standard claims for user (as email, verified)
// and audience aud, valid for ttl (negative: expired that long ago).
func (o *OIDCIssuer) Claims(email, aud string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{"iss": o.URL, "sub": "sub-" + email, "aud": aud, "email": email, "email_verified": true,
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix()}
}

// Token signs claims with the issuer's key.
func (o *OIDCIssuer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	return SignJWT(t, o.Key, o.Kid, claims)
}

// SignJWT makes an RS256 JWT of claims signed by key, naming kid.
func SignJWT(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signing := jwtPart(t, map[string]any{"alg": "RS256", "typ": "JWT", "kid": kid}) + "." + jwtPart(t, claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// UnsignedJWT is claims with "alg": "none" and no signature.
func UnsignedJWT(t testing.TB, claims map[string]any) string {
	t.Helper()
	return jwtPart(t, map[string]any{"alg": "none", "typ": "JWT"}) + "." + jwtPart(t, claims) + "."
}

func jwtPart(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// SetLoginTTL sets how long the ID tokens of later logins and refreshes
// last (default an hour).
func (o *OIDCIssuer) SetLoginTTL(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.loginTTL = d
}

// Refreshes is how many refresh grants the issuer answered.
func (o *OIDCIssuer) Refreshes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refreshes
}
