package claude

import (
	"time"

	"github.com/cast-dev/cast/internal/agents/kit"
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

// Credential is how token custody reads and trims Claude's login file.
func (Driver) Credential() custody.Format { return Credential{} }

// File is the credential file's name.
func (Credential) File() string { return ".credentials.json" }

// credLayout is where .credentials.json keeps its tokens: a file without an
// access token is no login.
var credLayout = kit.TokenLayout{
	Key: "claudeAiOauth", Refresh: "refreshToken",
	Shape:  `a Claude credential is .credentials.json with {"claudeAiOauth":{"accessToken":...}}`,
	Usable: func(f *kit.TokenFile) bool { return f.Token("accessToken") != "" },
}

// decodeCred reads a .credentials.json.
var decodeCred = credLayout.Decode

// Parse reads the file. Claude keeps no issue time; expiresAt orders it.
func (Credential) Parse(raw []byte) (custody.Token, error) {
	f, err := decodeCred(raw)
	if err != nil {
		return custody.Token{}, err
	}
	var t custody.Token
	if ms, ok := f.Tokens["expiresAt"].(float64); ok && ms > 0 {
		t.Expires = time.UnixMilli(int64(ms))
		t.Issued = t.Expires
	}
	t.HasRefresh, t.AccessID = f.Token("refreshToken") != "", custody.Fingerprint(f.Token("accessToken"))
	return t, nil
}

// AccessOnly drops the refresh token; Claude then never refreshes.
func (Credential) AccessOnly(raw []byte) ([]byte, error) {
	f, err := decodeCred(raw)
	if err != nil {
		return nil, err
	}
	delete(f.Tokens, "refreshToken")
	return f.Encode()
}

// RefreshToken returns the refresh token.
func (Credential) RefreshToken(raw []byte) (string, error) { return credLayout.RefreshToken(raw) }

// Apply stores a refresh's answer as Claude does (its refresh keeps the
// old refresh token when the answer has none).
func (Credential) Apply(raw []byte, g custody.Grant) ([]byte, error) {
	f, err := decodeCred(raw)
	if err != nil {
		return nil, err
	}
	f.Refreshed("accessToken", g.Access, "refreshToken", g.Refresh)
	f.Tokens["expiresAt"] = g.Expires.UnixMilli()
	return f.Encode()
}
