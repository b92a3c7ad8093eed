package pi

import (
	"crypto/sha1"
	"fmt"
)

// entryID is an 8-hex entry id like pi's own, stable for (session, n),
// and none of taken, which it joins. Like pi, which draws its ids again
// on a collision: two of 100,000 ids of 32 bits collide about once, and
// a repeated id breaks the parent chain pi and the reader follow (the
// entries between the two were lost).
func entryID(sid string, n int, taken map[string]bool) string {
	for again := 0; ; again++ {
		key := fmt.Appendf(nil, "cast:%s:%d", sid, n)
		if again > 0 {
			key = fmt.Appendf(key, ":%d", again)
		}
		h := sha1.Sum(key)
		if id := fmt.Sprintf("%x", h[:4]); !taken[id] {
			taken[id] = true
			return id
		}
	}
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
