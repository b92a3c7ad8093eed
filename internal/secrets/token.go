package secrets

import (
	"crypto/subtle"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinTokenLen is the shortest node token accepted (e.g. `openssl rand
// -hex 32` gives 64 characters).
const MinTokenLen = 32

// ReadToken reads a shared token from a file that only its owner can
// read; surrounding whitespace is dropped. The token is never echoed in an
// error.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o, readable by others; run: chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenLen || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s must hold one token of at least %d characters (e.g. `openssl rand -hex 32`)", path, MinTokenLen)
	}
	return tok, nil
}

// TokenEqual compares a presented token with the expected one in constant
// time.
func TokenEqual(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
