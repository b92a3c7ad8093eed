package secrets

import (
	"crypto/subtle"
	"fmt"
	"io"
	"strings"
)

// MinTokenLen is the shortest node token accepted (e.g. `openssl rand
// -hex 32` gives 64 characters).
const MinTokenLen = 32

// ReadToken reads a shared token from a file that only its owner can
// read; surrounding whitespace is dropped. The token is never echoed in an
// error.
func ReadToken(path string) (string, error) {
	f, err := openPrivate(path, "token file")
	if err != nil {
		return "", err
	}
	defer f.Close()
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

// ReadPrivate reads a private file (a key, a certificate with its key)
// of at most limit bytes, refusing one others can read.
func ReadPrivate(path, what string, limit int64) ([]byte, error) {
	f, err := openPrivate(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s is larger than %d bytes", what, path, limit)
	}
	return b, nil
}
