package pi

import (
	"crypto/sha1"
	"fmt"
)

// entryID is an 8-hex entry id like pi's own, stable for (session, n).
func entryID(sid string, n int) string {
	h := sha1.Sum(fmt.Appendf(nil, "cast:%s:%d", sid, n))
	return fmt.Sprintf("%x", h[:4])
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
