package grok

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"strings"
)

// stableUUID derives a version-5-style UUID from seed, so rewriting the same
// cast session gives the same native ids.
func stableUUID(seed string) string {
	h := sha1.Sum([]byte("cast:" + seed))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// toolName renders a tool name from any agent as an OpenAI-style function
// name ([A-Za-z0-9_-], 1-64), which the xAI API requires.
func toolName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		return "unknown_tool"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// argsString turns a neutral tool input into the JSON object text Grok
// keeps in tool_calls[].arguments.
func argsString(input string) string {
	input = strings.TrimSpace(input)
	if input == "" {
		return "{}"
	}
	var v any
	if json.Unmarshal([]byte(input), &v) != nil {
		b, _ := json.Marshal(map[string]string{"input": input})
		return string(b)
	}
	if _, ok := v.(map[string]any); ok {
		var buf bytes.Buffer
		_ = json.Compact(&buf, []byte(input))
		return buf.String()
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"input": json.RawMessage(input)})
	return string(b)
}

// unreserved reports RFC 3986 unreserved bytes, the only ones Grok leaves
// as they are in a project folder name.
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// projectDir is Grok's folder name for a cwd: every byte outside the
// unreserved set percent-encoded (so "/" is %2F and " " is %20).
func projectDir(cwd string) string {
	var b strings.Builder
	for i := 0; i < len(cwd); i++ {
		c := cwd[i]
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
