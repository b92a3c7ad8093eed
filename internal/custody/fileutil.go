package custody

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Fingerprint names a token in logs and comparisons without revealing it.
func Fingerprint(tok string) string {
	if tok == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:6])
}

// JWTTimes reads iat and exp from a JWT's claims without verifying it
// (cast only orders and schedules by them; the provider verifies).
func JWTTimes(tok string) (iat, exp time.Time, err error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, time.Time{}, fmt.Errorf("not a JWT")
	}
	body, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("JWT claims: %w", err)
	}
	var c struct {
		Iat, Exp float64
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("JWT claims: %w", err)
	}
	if c.Iat > 0 {
		iat = time.Unix(int64(c.Iat), 0)
	}
	if c.Exp > 0 {
		exp = time.Unix(int64(c.Exp), 0)
	}
	return iat, exp, nil
}
