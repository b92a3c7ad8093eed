package kit

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTokenFile(t *testing.T) {
	const shape = "a test credential"
	for _, tc := range []struct {
		name, raw, err string
		refresh        string // Refreshed's refresh token
		want           map[string]any
	}{
		{name: "not JSON", raw: `{`, err: shape + ": "},
		{name: "tokens not an object", raw: `{"t":"x"}`, err: shape + ": "},
		{name: "no tokens is kept as it is", raw: `{"k":"sk","other":[1]}`,
			want: map[string]any{"k": "sk", "other": []any{1.0}}},
		{name: "null tokens is kept as it is", raw: `{"t":null}`, want: map[string]any{"t": nil}},
		{name: "a refresh without a refresh token keeps the old one", raw: `{"t":{"a":"old","r":"R","x":1},"other":true}`,
			want: map[string]any{"t": map[string]any{"a": "new", "r": "R", "x": 1.0}, "other": true}},
		{name: "a refresh with a refresh token stores it", raw: `{"t":{"a":"old","r":"R"}}`, refresh: "R2",
			want: map[string]any{"t": map[string]any{"a": "new", "r": "R2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeTokenFile([]byte(tc.raw), "t", shape)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Tokens != nil {
				if f.Token("a") != "old" || f.Token("missing") != "" {
					t.Fatalf("Token: a=%q missing=%q", f.Token("a"), f.Token("missing"))
				}
				f.Refreshed("a", "new", "r", tc.refresh)
			}
			b, err := f.Encode()
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(t, got), mustJSON(t, tc.want); g != w {
				t.Fatalf("encoded %s, want %s", g, w)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTokenLayout(t *testing.T) {
	l := TokenLayout{Key: "t", Refresh: "r", Shape: "a test credential",
		Usable: func(f *TokenFile) bool { return f.Token("a") != "" }}
	for _, tc := range []struct {
		name, raw, refresh, err string
	}{
		{name: "not JSON", raw: `{`, err: "a test credential: "},
		{name: "no access token is no login", raw: `{"t":{"r":"R"}}`, err: "a test credential"},
		{name: "no tokens is no login", raw: `{"k":"sk"}`, err: "a test credential"},
		{name: "a login's refresh token", raw: `{"t":{"a":"A","r":"R"}}`, refresh: "R"},
		{name: "a login without one", raw: `{"t":{"a":"A"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.RefreshToken([]byte(tc.raw))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.refresh {
				t.Fatalf("RefreshToken = %q, %v; want %q", got, err, tc.refresh)
			}
		})
	}
}
