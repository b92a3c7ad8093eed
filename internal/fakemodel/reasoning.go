package fakemodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Encrypted reasoning, as OpenAI's Responses API returns it to Codex: an
// opaque encrypted_content that only the account which produced it can send
// back. With SetEncryptedReasoning on, every Responses answer starts with a
// reasoning item (a visible summary and content sealed to the request's
// credential), and a request that carries reasoning sealed to another
// credential is refused with 400, as the real API refuses it.

// sealPrefix starts every encrypted_content the fake hands out.
const sealPrefix = "fakeenc:"

// SetEncryptedReasoning turns encrypted reasoning on or off.
func (s *Server) SetEncryptedReasoning(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.encrypted = on
}

// ThoughtSummary is the visible summary of the reasoning the fake sends on
// conversation turn n.
func ThoughtSummary(n int) string { return fmt.Sprintf("FAKE-THOUGHT-%d", n) }

// SealOf is the prefix of every encrypted_content sealed to credential
// token (a digest: the secret itself never lands in a transcript).
func SealOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return sealPrefix + hex.EncodeToString(sum[:8]) + ":"
}

// credentialOf is the bearer token or API key a request carries.
func credentialOf(h http.Header) string {
	if k := h.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// foreignSeal returns the first encrypted_content in a Responses request's
// input that was not sealed to its credential ("" when none).
func foreignSeal(in map[string]any, h http.Header) string {
	own := SealOf(credentialOf(h))
	for _, x := range list(in["input"]) {
		xm, _ := x.(map[string]any)
		if str(xm["type"]) != "reasoning" {
			continue
		}
		if enc := str(xm["encrypted_content"]); enc != "" && !strings.HasPrefix(enc, own) {
			return enc
		}
	}
	return ""
}

// reasoningItem is the reasoning output item of turn n for credential token.
func reasoningItem(id string, n int, token string) map[string]any {
	return map[string]any{"id": "rs_fake_" + id, "type": "reasoning",
		"summary":           []any{map[string]any{"type": "summary_text", "text": ThoughtSummary(n)}},
		"encrypted_content": fmt.Sprintf("%s%d", SealOf(token), n)}
}
