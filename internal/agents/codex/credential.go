package codex

import (
	"encoding/json"
	"fmt"
	"time"

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

// File is the credential file's name.
func (Credential) File() string { return "auth.json" }

const shapeErr = `a Codex credential is auth.json with "OPENAI_API_KEY" or "tokens"`

func decodeCred(raw []byte) (map[string]json.RawMessage, map[string]any, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", shapeErr, err)
	}
	var toks map[string]any
	if b, ok := top["tokens"]; ok && string(b) != "null" {
		if err := json.Unmarshal(b, &toks); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", shapeErr, err)
		}
	}
	var key string
	_ = json.Unmarshal(top["OPENAI_API_KEY"], &key)
	if at, _ := toks["access_token"].(string); at == "" && key == "" {
		return nil, nil, fmt.Errorf("%s", shapeErr)
	}
	return top, toks, nil
}

func encodeCred(top map[string]json.RawMessage, toks map[string]any) ([]byte, error) {
	if toks != nil {
		b, err := json.Marshal(toks)
		if err != nil {
			return nil, err
		}
		top["tokens"] = b
	}
	return json.Marshal(top)
}

// Parse reads the file: issue time from the access token's iat or
// last_refresh, whichever is later; expiry from its exp.
func (Credential) Parse(raw []byte) (custody.Token, error) {
	top, toks, err := decodeCred(raw)
	if err != nil {
		return custody.Token{}, err
	}
	var t custody.Token
	at, _ := toks["access_token"].(string)
	if at == "" {
		return t, nil // an API key: no token family
	}
	rt, _ := toks["refresh_token"].(string)
	t.HasRefresh, t.AccessID = rt != "", custody.Fingerprint(at)
	if iat, exp, err := custody.JWTTimes(at); err == nil {
		t.Issued, t.Expires = iat, exp
	}
	// iat has whole seconds; last_refresh, which Codex writes with each
	// refresh, orders two refreshes within one second.
	var lr time.Time
	if json.Unmarshal(top["last_refresh"], &lr) == nil && lr.After(t.Issued) {
		t.Issued = lr
	}
	return t, nil
}

// AccessOnly empties the refresh token; Codex then refreshes never while
// the access token lives.
func (Credential) AccessOnly(raw []byte) ([]byte, error) {
	top, toks, err := decodeCred(raw)
	if err != nil || toks == nil {
		return raw, err
	}
	toks["refresh_token"] = ""
	return encodeCred(top, toks)
}

// RefreshToken returns the refresh token.
func (Credential) RefreshToken(raw []byte) (string, error) {
	_, toks, err := decodeCred(raw)
	if err != nil {
		return "", err
	}
	rt, _ := toks["refresh_token"].(string)
	return rt, nil
}

// Apply stores a refresh's answer as Codex does: new tokens and
// last_refresh.
func (Credential) Apply(raw []byte, g custody.Grant) ([]byte, error) {
	top, toks, err := decodeCred(raw)
	if err != nil {
		return nil, err
	}
	if toks == nil {
		return nil, fmt.Errorf("an API-key auth.json has no token to refresh")
	}
	toks["access_token"] = g.Access
	if g.Refresh != "" {
		toks["refresh_token"] = g.Refresh
	}
	if g.IDToken != "" {
		toks["id_token"] = g.IDToken
	}
	lr, _ := json.Marshal(g.Issued.UTC())
	top["last_refresh"] = lr
	return encodeCred(top, toks)
}
