package pi

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

// entryID is an 8-hex entry id like pi's own, stable for (session, n).
func entryID(sid string, n int) string {
	h := sha1.Sum(fmt.Appendf(nil, "cast:%s:%d", sid, n))
	return fmt.Sprintf("%x", h[:4])
}

// toolName renders a tool name from any agent so every provider pi may
// talk to accepts it: OpenAI and Anthropic allow only [A-Za-z0-9_-], 1-64.
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

// argsObject turns a neutral tool input (JSON text as the source agent sent
// it) into the JSON object pi keeps as toolCall.arguments.
func argsObject(input string) json.RawMessage {
	input = strings.TrimSpace(input)
	if input == "" {
		return json.RawMessage("{}")
	}
	var v any
	if json.Unmarshal([]byte(input), &v) != nil {
		b, _ := json.Marshal(map[string]string{"input": input})
		return b
	}
	if _, ok := v.(map[string]any); ok {
		var buf bytes.Buffer
		_ = json.Compact(&buf, []byte(input))
		return buf.Bytes()
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"input": json.RawMessage(input)})
	return b
}

// provider names the pi provider a foreign agent's answers came from. pi
// only uses it to pick a model on resume (falling back when unknown) and to
// decide whether thinking blocks are its own.
func provider(agent string) string {
	switch agent {
	case "claude":
		return "anthropic"
	case "codex":
		return "openai"
	case "gemini":
		return "google"
	case "grok":
		return "xai"
	case "":
		return "cast"
	}
	return agent
}
