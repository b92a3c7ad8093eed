package testharness

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// OIDCIssuer is a fake OpenID Connect issuer on 127.0.0.1: a discovery
// document and a JWKS with one RSA key it made, and ID tokens it signs
// with that key (RS256). Tests point a control plane's --oidc-issuer at
// URL and hand out tokens from Token.
type OIDCIssuer struct {
	URL string
	Key *rsa.PrivateKey
	Kid string
}

// StartOIDCIssuer starts an issuer, stopped at cleanup.
func StartOIDCIssuer(t testing.TB) *OIDCIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o := &OIDCIssuer{Key: key, Kid: "k1"}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": o.URL, "jwks_uri": o.URL + "/keys",
			"authorization_endpoint": o.URL + "/auth", "token_endpoint": o.URL + "/token",
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		enc := base64.RawURLEncoding.EncodeToString
		writeJSON(w, map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "alg": "RS256", "use": "sig", "kid": o.Kid,
			"n": enc(key.N.Bytes()), "e": enc(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	return o
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
