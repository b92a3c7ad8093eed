package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/cast-dev/cast/internal/authz"
)

// Logins holds the one-time login codes and the browser sessions they
// became, in this replica's memory, by the SHA-256 of each secret: a
// restart signs every browser out, and with several replicas a browser
// must reach the replica that made its link (docs/web.md).
type Logins struct {
	codeTTL, sessionTTL time.Duration
	now                 func() time.Time

	mu       sync.Mutex
	codes    map[string]grant
	sessions map[string]grant
}

// grant is a principal until a time.
type grant struct {
	p     authz.Principal
	until time.Time
}

// NewLogins keeps codes for codeTTL and sessions for sessionTTL.
func NewLogins(codeTTL, sessionTTL time.Duration) *Logins {
	return &Logins{codeTTL: codeTTL, sessionTTL: sessionTTL, now: time.Now,
		codes: map[string]grant{}, sessions: map[string]grant{}}
}

// NewCode returns a code that signs a browser in as p, once, before the
// time returned.
func (l *Logins) NewCode(p authz.Principal) (string, time.Time, error) {
	code, err := secret()
	if err != nil {
		return "", time.Time{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	until := l.now().Add(l.codeTTL)
	l.codes[digest(code)] = grant{p: p, until: until}
	return code, until, nil
}

// Exchange consumes code and returns a new session id for its principal;
// ok is false for a code that is unknown, used or expired.
func (l *Logins) Exchange(code string) (sid string, p authz.Principal, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	g, found := l.codes[digest(code)]
	delete(l.codes, digest(code)) // used, whatever comes next
	if !found {
		return "", authz.Principal{}, false, nil
	}
	if sid, err = l.grantLocked(g.p, time.Time{}); err != nil {
		return "", authz.Principal{}, false, err
	}
	return sid, g.p, true, nil
}

// Grant starts a session for p (signed in another way: OIDC) until the
// session lifetime ends, or until if that is sooner (an ID token's exp).
func (l *Logins) Grant(p authz.Principal, until time.Time) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grantLocked(p, until)
}

func (l *Logins) grantLocked(p authz.Principal, until time.Time) (string, error) {
	sid, err := secret()
	if err != nil {
		return "", err
	}
	end := l.now().Add(l.sessionTTL)
	if !until.IsZero() && until.Before(end) {
		end = until
	}
	l.sessions[digest(sid)] = grant{p: p, until: end}
	return sid, nil
}

// Session returns the principal of a live session id.
func (l *Logins) Session(sid string) (authz.Principal, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.sessions[digest(sid)]
	if !ok || !l.now().Before(g.until) {
		return authz.Principal{}, false
	}
	return g.p, true
}

// End signs a session out.
func (l *Logins) End(sid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.sessions, digest(sid))
}

// sweep drops what has expired; called under mu.
func (l *Logins) sweep() {
	now := l.now()
	for _, m := range []map[string]grant{l.codes, l.sessions} {
		for k, g := range m {
			if !now.Before(g.until) {
				delete(m, k)
			}
		}
	}
}

// secret is 256 random bits, hex.
func secret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
