package claude

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cast-dev/cast/internal/custody"
)

// Credential is Claude Code's login file, .credentials.json in
// CLAUDE_CONFIG_DIR: {"claudeAiOauth":{"accessToken","refreshToken",
// "expiresAt" (Unix ms),"scopes",...}}. Claude 2.1.197 refreshes when the
// access token expires within 5 minutes and only when the file has a
// refresh token; without one it sends the access token as it is
// (docs/token-custody.md).
type Credential struct{}

var _ custody.Format = Credential{}

const oauthKey = "claudeAiOauth"

// File is the credential file's name.
func (Credential) File() string { return ".credentials.json" }

func decodeCred(raw []byte) (map[string]json.RawMessage, map[string]any, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, nil, fmt.Errorf("a Claude credential is .credentials.json (JSON): %w", err)
	}
	var o map[string]any
	if err := json.Unmarshal(top[oauthKey], &o); err != nil || o == nil {
		return nil, nil, fmt.Errorf(`a Claude credential is .credentials.json with {"claudeAiOauth":{"accessToken":...}}`)
	}
	if tok, _ := o["accessToken"].(string); tok == "" {
		return nil, nil, fmt.Errorf(`a Claude credential is .credentials.json with {"claudeAiOauth":{"accessToken":...}}`)
	}
	return top, o, nil
}

func encodeCred(top map[string]json.RawMessage, o map[string]any) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	top[oauthKey] = b
	return json.Marshal(top)
}

// Parse reads the file. Claude keeps no issue time; expiresAt orders it.
func (Credential) Parse(raw []byte) (custody.Token, error) {
	_, o, err := decodeCred(raw)
	if err != nil {
		return custody.Token{}, err
	}
	var t custody.Token
	if ms, ok := o["expiresAt"].(float64); ok && ms > 0 {
		t.Expires = time.UnixMilli(int64(ms))
		t.Issued = t.Expires
	}
	rt, _ := o["refreshToken"].(string)
	at, _ := o["accessToken"].(string)
	t.HasRefresh, t.AccessID = rt != "", custody.Fingerprint(at)
	return t, nil
}

// AccessOnly drops the refresh token; Claude then never refreshes.
func (Credential) AccessOnly(raw []byte) ([]byte, error) {
	top, o, err := decodeCred(raw)
	if err != nil {
		return nil, err
	}
	delete(o, "refreshToken")
	return encodeCred(top, o)
}

// RefreshToken returns the refresh token.
func (Credential) RefreshToken(raw []byte) (string, error) {
	_, o, err := decodeCred(raw)
	if err != nil {
		return "", err
	}
	rt, _ := o["refreshToken"].(string)
	return rt, nil
}

// Apply stores a refresh's answer as Claude does (its refresh keeps the
// old refresh token when the answer has none).
func (Credential) Apply(raw []byte, g custody.Grant) ([]byte, error) {
	top, o, err := decodeCred(raw)
	if err != nil {
		return nil, err
	}
	o["accessToken"] = g.Access
	if g.Refresh != "" {
		o["refreshToken"] = g.Refresh
	}
	o["expiresAt"] = g.Expires.UnixMilli()
	return encodeCred(top, o)
}
