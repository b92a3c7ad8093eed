package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/secrets"
)

// A context's token-command is a program (an argv list, run without a
// shell) whose standard output is the bearer token: an OIDC helper
// printing an ID token, so `cast` works with any identity provider. The
// token is kept until its exp (read from the JWT, unverified: the control
// plane verifies it), in memory and in a 0600 file under the user's cache
// dir, so the helper (which may open a browser) runs once per token, not
// once per command; a call refused as unauthenticated drops it.

const (
	// tokenMargin: a token this close to its exp is fetched again, so a
	// clock a little off the control plane's does not send an expired one.
	tokenMargin = time.Minute
	// tokenCommandTimeout bounds one run of the helper; an interactive
	// login may take a while, so it does not share a call's deadline.
	tokenCommandTimeout = 5 * time.Minute
	maxTokenBytes       = 64 << 10
)

// TokenCacheDir is where token-command tokens are cached for env
// (os.Getenv-like): $XDG_CACHE_HOME/cast/tokens, else
// ~/.cache/cast/tokens; "" (memory only) without either.
func TokenCacheDir(getenv func(string) string) string {
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "cast", "tokens")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "cast", "tokens")
	}
	return ""
}

// tokenCommand runs argv for a token and caches it until its exp.
type tokenCommand struct {
	argv  []string
	cache string // the cache file; "": memory only

	mu  sync.Mutex
	tok string
	exp time.Time // zero: none known, kept for this process only
}

// CommandToken returns a Token whose value argv prints, cached under
// cacheDir ("" for memory only).
func CommandToken(argv []string, cacheDir string) *Token {
	tc := &tokenCommand{argv: argv}
	if cacheDir != "" {
		sum := sha256.Sum256([]byte(strings.Join(argv, "\x00")))
		tc.cache = filepath.Join(cacheDir, hex.EncodeToString(sum[:16])+".json")
	}
	t := NewToken("")
	t.src, t.forget = tc.get, tc.forget
	return t
}

// forget drops the token (the control plane refused it: keys rotated, a
// clock off), so the next call runs the helper again.
func (tc *tokenCommand) forget() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.tok, tc.exp = "", time.Time{}
	if tc.cache != "" {
		_ = os.Remove(tc.cache)
	}
}

func fresh(exp, now time.Time) bool { return exp.IsZero() || now.Add(tokenMargin).Before(exp) }

func (tc *tokenCommand) get(ctx context.Context) (string, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	now := time.Now()
	if tc.tok != "" && fresh(tc.exp, now) {
		return tc.tok, nil
	}
	if tok, exp, ok := tc.readCache(); ok && !exp.IsZero() && fresh(exp, now) {
		tc.tok, tc.exp = tok, exp
		return tok, nil
	}
	tok, err := tc.run(ctx)
	if err != nil {
		return "", err
	}
	tc.tok, tc.exp = tok, jwtExpiry(tok)
	if !tc.exp.IsZero() && fresh(tc.exp, now) {
		tc.writeCache()
	}
	return tok, nil
}

// run runs the helper: no shell, stdin empty, its stderr the user's (a
// helper may print a login URL there).
func (tc *tokenCommand) run(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tc.argv[0], tc.argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitedWriter{w: &out, n: maxTokenBytes}, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("token-command %s failed: %w (its own messages, if any, are above)", tc.argv[0], err)
	}
	tok := strings.TrimSpace(out.String())
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token-command %s must print one token on stdout, got %d bytes over %d lines", tc.argv[0], len(tok), strings.Count(tok, "\n")+1)
	}
	return tok, nil
}

type cachedToken struct {
	Token string `json:"token"`
	Exp   int64  `json:"exp"`
}

// readCache returns the cached token; any failure is a miss (the helper
// runs again and the file is rewritten).
func (tc *tokenCommand) readCache() (string, time.Time, bool) {
	if tc.cache == "" {
		return "", time.Time{}, false
	}
	b, err := secrets.ReadPrivate(tc.cache, "token cache", maxTokenBytes)
	if err != nil {
		return "", time.Time{}, false
	}
	var c cachedToken
	if json.Unmarshal(b, &c) != nil || c.Token == "" || c.Exp == 0 {
		return "", time.Time{}, false
	}
	return c.Token, time.Unix(c.Exp, 0), true
}

// writeCache stores the token (0600, atomically); a failure only costs a
// later run of the helper.
func (tc *tokenCommand) writeCache() {
	if tc.cache == "" {
		return
	}
	b, err := json.Marshal(cachedToken{Token: tc.tok, Exp: tc.exp.Unix()})
	if err != nil || os.MkdirAll(filepath.Dir(tc.cache), 0o700) != nil {
		return
	}
	_ = fsutil.WriteFileAtomic(tc.cache, b, 0o600)
}

// jwtExpiry reads a JWT's exp claim without verifying it (zero: not a JWT
// or no exp).
func jwtExpiry(tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return time.Time{}
	}
	f, err := claims.Exp.Float64()
	if err != nil || f <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(f), 0)
}

// limitedWriter keeps the first n bytes and fails past them, so a helper
// printing without end cannot fill memory.
type limitedWriter struct {
	w io.Writer
	n int
}

var errTooLong = errors.New("token-command output is over 64 KiB")

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, errTooLong
	}
	l.n -= len(p)
	return l.w.Write(p)
}
