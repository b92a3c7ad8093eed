package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
)

// Grants keeps login codes and browser sessions (the control plane's
// store: etcd keys under leases, by the SHA-256 of each secret), so every
// replica honours them and a restart signs no one out.
type Grants interface {
	PutWebGrant(ctx context.Context, kind, hash string, value []byte, ttl time.Duration) error
	TakeWebGrant(ctx context.Context, kind, hash string) ([]byte, bool, error)
	GetWebGrant(ctx context.Context, kind, hash string) ([]byte, bool, error)
	DeleteWebGrant(ctx context.Context, kind, hash string) error
}

// StoreTimeout bounds each store call a sign-in or an API call makes.
const StoreTimeout = 5 * time.Second

// The kinds of grant (the store's key prefixes).
const (
	kindCode    = "webcodes"
	kindSession = "websessions"
	kindFlow    = "weboidcflows" // an OIDC sign-in between its start and its callback
)

// Logins makes and checks the one-time login codes and the browser
// sessions they become.
type Logins struct {
	codeTTL, sessionTTL time.Duration
	grants              boundedGrants
	now                 func() time.Time
}

// boundedGrants is Grants with a deadline on each call (timeout): while
// etcd cannot be reached its client waits for it as long as the call's
// context lets it, and a browser's request has none, so every API call
// and sign-out would hang instead of being told to retry.
type boundedGrants struct {
	g       Grants
	timeout time.Duration
}

func (b boundedGrants) PutWebGrant(ctx context.Context, kind, hash string, value []byte, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.g.PutWebGrant(ctx, kind, hash, value, ttl)
}

func (b boundedGrants) TakeWebGrant(ctx context.Context, kind, hash string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.g.TakeWebGrant(ctx, kind, hash)
}

func (b boundedGrants) GetWebGrant(ctx context.Context, kind, hash string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.g.GetWebGrant(ctx, kind, hash)
}

func (b boundedGrants) DeleteWebGrant(ctx context.Context, kind, hash string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.g.DeleteWebGrant(ctx, kind, hash)
}

// grant is a principal until a time (a lease lapses to the second; the
// time is exact).
type grant struct {
	P     authz.Principal `json:"principal"`
	Until time.Time       `json:"until"`
	// Cap is, for a code a browser session made, that session's end: the
	// session the code becomes ends no later (zero: no cap).
	Cap time.Time `json:"cap,omitzero"`
}

// NewLogins keeps codes for codeTTL and sessions for sessionTTL in g.
func NewLogins(g Grants, codeTTL, sessionTTL time.Duration) *Logins {
	return &Logins{codeTTL: codeTTL, sessionTTL: sessionTTL, grants: boundedGrants{g: g, timeout: StoreTimeout}, now: time.Now}
}

// NewCode returns a code that signs a browser in as p, once, before the
// time returned. A code asked for by a browser session (ctx is a call
// through this app's API) signs in a session that ends when that one
// does: otherwise a browser could trade each session for a fresh one
// before it ended and stay signed in for ever.
func (l *Logins) NewCode(ctx context.Context, p authz.Principal) (string, time.Time, error) {
	code, err := secret()
	if err != nil {
		return "", time.Time{}, err
	}
	until := l.now().Add(l.codeTTL)
	c, _ := ctx.Value(callerKey{}).(caller)
	if err := l.put(ctx, kindCode, code, grant{P: p, Until: until, Cap: c.until}); err != nil {
		return "", time.Time{}, err
	}
	return code, until, nil
}

// Peek returns the principal a live code signs in as, leaving it unused.
func (l *Logins) Peek(ctx context.Context, code string) (authz.Principal, bool, error) {
	g, ok, err := l.live(ctx, kindCode, code)
	return g.P, ok, err
}

// SignIn is a browser session just started.
type SignIn struct {
	ID    string // its secret: the cookie's value
	P     authz.Principal
	Until time.Time // its end
}

// Exchange consumes code and returns a new session for its principal; ok
// is false for a code that is unknown, used or expired. The code is taken
// only once its session is saved: a sign-in whose save failed tells the
// browser to retry, and the retry needs the code. Of two exchanges of one
// code only the one that takes it keeps its session.
func (l *Logins) Exchange(ctx context.Context, code string) (s SignIn, ok bool, err error) {
	g, found, err := l.live(ctx, kindCode, code)
	if err != nil || !found {
		return SignIn{}, false, err
	}
	if !g.Cap.IsZero() && !l.now().Before(g.Cap) { // the browser session that made it has ended
		return SignIn{}, false, nil
	}
	if s, err = l.Grant(ctx, g.P, g.Cap); err != nil {
		return SignIn{}, false, err
	}
	_, taken, err := l.grants.TakeWebGrant(ctx, kindCode, digest(code))
	if err != nil || !taken {
		// Not taken by this exchange (another took it, or the store
		// failed): its session is not given out. Ending it is tidiness:
		// one left behind is of use to no one, its id was never sent.
		_ = l.End(ctx, s.ID)
		return SignIn{}, false, err
	}
	return s, true, nil
}

// Grant starts a session for p until the session lifetime ends, or until
// if that is sooner (an ID token's exp).
func (l *Logins) Grant(ctx context.Context, p authz.Principal, until time.Time) (SignIn, error) {
	sid, err := secret()
	if err != nil {
		return SignIn{}, err
	}
	end := l.now().Add(l.sessionTTL)
	if !until.IsZero() && until.Before(end) {
		end = until
	}
	if err := l.put(ctx, kindSession, sid, grant{P: p, Until: end}); err != nil {
		return SignIn{}, err
	}
	return SignIn{ID: sid, P: p, Until: end}, nil
}

// Session returns the principal of a live session id.
func (l *Logins) Session(ctx context.Context, sid string) (authz.Principal, bool, error) {
	g, ok, err := l.live(ctx, kindSession, sid)
	return g.P, ok, err
}

// live returns a grant not yet expired.
func (l *Logins) live(ctx context.Context, kind, secret string) (grant, bool, error) {
	b, found, err := l.grants.GetWebGrant(ctx, kind, digest(secret))
	if err != nil || !found {
		return grant{}, false, err
	}
	var g grant
	if json.Unmarshal(b, &g) != nil || !l.now().Before(g.Until) {
		return grant{}, false, nil
	}
	return g, true, nil
}

// End signs a session out.
func (l *Logins) End(ctx context.Context, sid string) error {
	return l.endHash(ctx, digest(sid))
}

// endHash signs out the session kept by hash.
func (l *Logins) endHash(ctx context.Context, hash string) error {
	return l.grants.DeleteWebGrant(ctx, kindSession, hash)
}

// replaced ends the session (hash) a browser held before it signed in
// again: the new cookie replaces the old one in the browser, but the old
// session would stay live in the store until its end for whoever kept a
// copy of the cookie. A failure leaves the sign-in done (the old session
// still ends at its time) and is logged.
func (l *Logins) replaced(ctx context.Context, hash string, lg *zap.Logger) {
	if hash == "" {
		return
	}
	if err := l.endHash(ctx, hash); err != nil {
		lg.Warn("web replaced session not ended", zap.Error(err))
	}
}

func (l *Logins) put(ctx context.Context, kind, secret string, g grant) error {
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return l.grants.PutWebGrant(ctx, kind, digest(secret), b, g.Until.Sub(l.now()))
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
