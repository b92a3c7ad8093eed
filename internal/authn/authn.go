// Package authn names the caller of a request from what it presented: a
// client certificate (checked against the trust a replica holds, then
// against its credential record), a cast bearer token (by its hash, through
// a cache the revocation watch keeps) or an OIDC ID token (through the
// issuer's verifier). It knows nothing of gRPC: the control plane's
// interceptors hand it the header and the peer's certificates.
package authn

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/pki"
)

// Record is a credential record: the principal a token or a certificate
// is bound to.
type Record struct {
	Role, Name string
}

// Store is what authentication needs of the store.
type Store interface {
	// LookupRecord returns the credential record of hash; ok is false
	// when there is none (never made, or revoked).
	LookupRecord(ctx context.Context, hash string) (Record, bool, error)
}

// Verifier checks an OIDC ID token.
type Verifier interface {
	Verify(ctx context.Context, token string) (authz.Principal, error)
}

// Authenticator names callers. Its token cache is only as fresh as the
// revocation watch that feeds it (Watching, Revoked).
type Authenticator struct {
	st      Store
	oidc    Verifier // nil: no issuer trusted
	cache   *tokenCache
	revoked func(hash string) bool
	wait    time.Duration // bounds each store read
}

// New returns an Authenticator over st; oidc may be nil. revoked says
// whether the revocation watch saw hash deleted lately (so a look-up that
// raced the deletion is not cached). wait bounds each read of st.
func New(st Store, oidc Verifier, revoked func(hash string) bool, wait time.Duration) *Authenticator {
	return &Authenticator{st: st, oidc: oidc, cache: newTokenCache(), revoked: revoked, wait: wait}
}

// Watching records whether the revocation watch runs: the cache serves
// only while it does, and starts empty either way.
func (a *Authenticator) Watching(on bool) { a.cache.setWatching(on) }

// Revoked drops hash's cached record (the watch saw its deletion).
func (a *Authenticator) Revoked(hash string) { a.cache.drop(hash) }

// Lookup is the credential record of hash, through the cache.
func (a *Authenticator) Lookup(ctx context.Context, hash string) (Record, bool, error) {
	return a.lookup(ctx, hash, nil)
}

// lookup is Lookup; miss (nil: none) runs before the store is read, and
// its error is returned instead.
func (a *Authenticator) lookup(ctx context.Context, hash string, miss func() error) (Record, bool, error) {
	rec, ok, gen, at := a.cache.get(hash)
	if ok {
		return rec, true, nil
	}
	if miss != nil {
		if err := miss(); err != nil {
			return Record{}, false, err
		}
	}
	rec, ok, err := a.read(ctx, hash)
	if err == nil && ok {
		a.cache.put(hash, rec, gen, at, a.revoked)
	}
	return rec, ok, err
}

// read is the store's record of hash, within wait. A call may come with
// no deadline (a browser's never does; a CLI's or a node's stream may
// not): while etcd cannot be reached the read would wait for it as long as
// it is away, so the caller is told to retry (UNAVAILABLE; the web app's
// 503) instead. A call whose own deadline is sooner keeps it.
func (a *Authenticator) read(ctx context.Context, hash string) (Record, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, a.wait)
	defer cancel()
	rec, ok, err := a.st.LookupRecord(rctx, hash)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil { // the read's deadline, not the call's
		return Record{}, false, errs.New(errs.KindUnavailable, errs.ReasonUnavailable,
			"the store did not answer within %s while checking the caller's credential; retry", a.wait)
	}
	return rec, ok, err
}

// Bearer returns the caller an "authorization" header value names: a cast
// token, or an OIDC ID token; UNAUTHENTICATED for a malformed, unknown,
// expired or revoked one. miss (nil: none) may refuse a cast token the
// cache does not hold before the store is read (the control plane limits
// there what failing credentials cost).
func (a *Authenticator) Bearer(ctx context.Context, header string, miss func() error) (*authz.Principal, error) {
	tok, err := authz.ParseBearer(header)
	if err != nil {
		return nil, authz.Unauthenticated("%v", err)
	}
	if !strings.HasPrefix(tok, authz.TokenPrefix) && looksLikeJWT(tok) {
		return a.idToken(ctx, tok)
	}
	hash := authz.Hash(tok)
	rec, ok, err := a.lookup(ctx, hash, miss)
	if err != nil {
		return nil, err
	}
	if !ok || !authz.Role(rec.Role).Valid() {
		return nil, authz.Unauthenticated("the token is unknown or revoked; ask an admin for a new one (`cast token create`, or a join token for a node)")
	}
	return &authz.Principal{Role: authz.Role(rec.Role), Name: rec.Name, Cred: hash}, nil
}

// idToken returns the person an OIDC ID token names.
func (a *Authenticator) idToken(ctx context.Context, tok string) (*authz.Principal, error) {
	if a.oidc == nil {
		return nil, authz.Unauthenticated("this looks like an OIDC ID token, but this control plane trusts no OIDC issuer (--oidc-issuer); use a cast token")
	}
	p, err := a.oidc.Verify(ctx, tok)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// looksLikeJWT reports whether tok has a JWT's three dot-separated parts
// (cast's own tokens have none).
func looksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// Cert returns the caller a verified TLS client certificate chain names:
// it must chain to a CA set trusts, be within its lifetime, and its
// credential record must still be live and name the same principal.
func (a *Authenticator) Cert(ctx context.Context, chain []*x509.Certificate, set *catrust.Set, now time.Time) (*authz.Principal, error) {
	leaf := chain[0]
	// Named in refusals (and so in audit lines); unverified until it passes.
	claimed := fmt.Sprintf("%q of %q", leaf.Subject.CommonName, leaf.Issuer.CommonName)
	id, err := pki.VerifyClient(chain, set.Trusted, now)
	switch {
	case errors.Is(err, pki.ErrUntrusted) && set.RetiredIssuer(leaf) != "":
		return nil, errs.New(errs.KindUnauthenticated, errs.ReasonCertUntrusted,
			"the client certificate %s was issued by a CA this control plane retired (%s): a node joins again with a new join token, a user runs `cast token cert` with a token", claimed, set.RetiredIssuer(leaf))
	case errors.Is(err, pki.ErrExpired):
		return nil, errs.New(errs.KindUnauthenticated, errs.ReasonCertExpired,
			"%v (certificate %s); a node renews its own before then: join again with a new join token", err, claimed)
	case errors.Is(err, pki.ErrUntrusted):
		return nil, errs.New(errs.KindUnauthenticated, errs.ReasonCertUntrusted,
			"%v (certificate %s; is it another control plane's?)", err, claimed)
	case err != nil:
		return nil, authz.Unauthenticated("%v (certificate %s)", err, claimed)
	}
	rec, live, err := a.Lookup(ctx, id.Cred)
	if err != nil {
		return nil, err
	}
	if !live || rec.Role != id.Role || rec.Name != id.Name || !authz.Role(rec.Role).Valid() {
		return nil, errs.New(errs.KindUnauthenticated, errs.ReasonCertRevoked,
			"the certificate of %s:%s was revoked; a node joins again with a new join token (`cast node token create`)", id.Role, id.Name)
	}
	return &authz.Principal{Role: authz.Role(rec.Role), Name: rec.Name, Cred: id.Cred, CAPin: id.IssuerPin, Expires: leaf.NotAfter}, nil
}
