package codex

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/custody"
)

// Credential is Codex's login file, auth.json in CODEX_HOME. In ChatGPT
// mode it is {"OPENAI_API_KEY":null,"tokens":{"id_token","access_token",
// "refresh_token","account_id"},"last_refresh":RFC3339}; with an API key,
// {"OPENAI_API_KEY":"sk-..."} (nothing to refresh). Codex 0.171 refreshes
// when the access token (a JWT) has expired, posting to
// CODEX_REFRESH_TOKEN_URL_OVERRIDE when set; with an empty refresh token
// and a live access token it never calls the endpoint
// (docs/token-custody.md).
type Credential struct{}

var _ custody.Format = Credential{}

// Credential is how token custody reads and trims Codex's login file.
func (Driver) Credential() custody.Format { return Credential{} }

// File is the credential file's name.
func (Credential) File() string { return "auth.json" }

// credLayout is where auth.json keeps its tokens: a file is a login with an
// access token or an API key.
var credLayout = kit.TokenLayout{
	Key: "tokens", Refresh: "refresh_token",
	Shape:  `a Codex credential is auth.json with "OPENAI_API_KEY" or "tokens" holding an "access_token"`,
	Usable: func(f *kit.TokenFile) bool { return f.Token("access_token") != "" || apiKey(f) != "" },
}

// decodeCred reads an auth.json.
var decodeCred = credLayout.Decode

// apiKey is the file's OPENAI_API_KEY ("" when absent or null).
func apiKey(f *kit.TokenFile) string {
	var key string
	_ = json.Unmarshal(f.Top["OPENAI_API_KEY"], &key)
	return key
}

// Parse reads the file: issue time from the access token's iat or
// last_refresh, whichever is later; expiry from its exp.
func (Credential) Parse(raw []byte) (custody.Token, error) {
	f, err := decodeCred(raw)
	if err != nil {
		return custody.Token{}, err
	}
	var t custody.Token
	at := f.Token("access_token")
	if at == "" {
		return t, nil // an API key: no token family
	}
	t.HasRefresh, t.AccessID = f.Token("refresh_token") != "", custody.Fingerprint(at)
	if iat, exp, err := custody.JWTTimes(at); err == nil {
		t.Issued, t.Expires = iat, exp
	}
	// iat has whole seconds; last_refresh, which Codex writes with each
	// refresh, orders two refreshes within one second.
	var lr time.Time
	if json.Unmarshal(f.Top["last_refresh"], &lr) == nil && lr.After(t.Issued) {
		t.Issued = lr
	}
	return t, nil
}

// AccessOnly empties the refresh token; Codex then refreshes never while
// the access token lives.
func (Credential) AccessOnly(raw []byte) ([]byte, error) {
	f, err := decodeCred(raw)
	if err != nil || f.Tokens == nil {
		return raw, err
	}
	f.Tokens["refresh_token"] = ""
	return f.Encode()
}

// RefreshToken returns the refresh token.
func (Credential) RefreshToken(raw []byte) (string, error) { return credLayout.RefreshToken(raw) }

// Apply stores a refresh's answer as Codex does: new tokens and
// last_refresh.
func (Credential) Apply(raw []byte, g custody.Grant) ([]byte, error) {
	f, err := decodeCred(raw)
	if err != nil {
		return nil, err
	}
	if f.Tokens == nil {
		return nil, errors.New("an API-key auth.json has no token to refresh")
	}
	f.Refreshed("access_token", g.Access, "refresh_token", g.Refresh)
	if g.IDToken != "" {
		f.Tokens["id_token"] = g.IDToken
	}
	lr, _ := json.Marshal(g.Issued.UTC())
	f.Top["last_refresh"] = lr
	return f.Encode()
}
