package kit

import (
	"encoding/json"
	"errors"
	"fmt"
)

// TokenFile is a login file that is one JSON object keeping its tokens in
// an object under one key (Claude's "claudeAiOauth", Codex's "tokens").
// Decoding and encoding keep every other field as the CLI wrote it, so
// token custody's rewrites lose nothing.
type TokenFile struct {
	Top    map[string]json.RawMessage // the whole file
	Key    string                     // where the tokens are
	Tokens map[string]any             // nil when the file has none (no key, or null)
}

// DecodeTokenFile reads raw. A file that is not a JSON object, or whose
// key holds something other than an object or null, is an error that
// starts with shape (what the file must be).
func DecodeTokenFile(raw []byte, key, shape string) (*TokenFile, error) {
	f := &TokenFile{Key: key}
	if err := json.Unmarshal(raw, &f.Top); err != nil {
		return nil, fmt.Errorf("%s: %w", shape, err)
	}
	if b, ok := f.Top[key]; ok && string(b) != "null" {
		if err := json.Unmarshal(b, &f.Tokens); err != nil {
			return nil, fmt.Errorf("%s: %w", shape, err)
		}
	}
	return f, nil
}

// Token is the string field name of the tokens ("" when absent).
func (f *TokenFile) Token(name string) string {
	s, _ := f.Tokens[name].(string)
	return s
}

// Refreshed stores a refresh's answer: the access token always, the
// refresh token only when the answer has one (both CLIs keep the old one
// otherwise).
func (f *TokenFile) Refreshed(accessField, access, refreshField, refresh string) {
	f.Tokens[accessField] = access
	if refresh != "" {
		f.Tokens[refreshField] = refresh
	}
}

// Encode is the file with the tokens (when it has any) stored back.
func (f *TokenFile) Encode() ([]byte, error) {
	if f.Tokens != nil {
		b, err := json.Marshal(f.Tokens)
		if err != nil {
			return nil, err
		}
		f.Top[f.Key] = b
	}
	return json.Marshal(f.Top)
}

// TokenLayout is where one CLI's login file keeps its tokens and what
// makes it a login, so that every custody method of that file decodes it
// the same way.
type TokenLayout struct {
	Key     string // the object holding the tokens
	Refresh string // the refresh token's field in it
	Shape   string // what the file must be: the start of every decode error
	// Usable says whether a decoded file holds a login the CLI takes.
	Usable func(f *TokenFile) bool
}

// Decode is DecodeTokenFile of raw; a file that is not Usable is an error
// that is Shape.
func (l TokenLayout) Decode(raw []byte) (*TokenFile, error) {
	f, err := DecodeTokenFile(raw, l.Key, l.Shape)
	if err != nil {
		return nil, err
	}
	if !l.Usable(f) {
		return nil, errors.New(l.Shape)
	}
	return f, nil
}

// RefreshToken is the refresh token of the file raw ("" when it has none;
// custody.Format's RefreshToken).
func (l TokenLayout) RefreshToken(raw []byte) (string, error) {
	f, err := l.Decode(raw)
	if err != nil {
		return "", err
	}
	return f.Token(l.Refresh), nil
}
