package controlplane

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/web"
)

// Revocation reaches calls already open. Every call made with a credential
// record (a cast token, or a client certificate bound to one) is tracked
// by the record's hash while it runs, and a call made with a client
// certificate by its CA's pin too. Each replica follows the records in
// etcd (store.WatchRevocations) and the CA record (store.WatchCA), so a
// revocation or a CA retired through any replica cancels that principal's
// open calls on every replica within the watch's latency: WatchSession,
// ExportSession, a node's Connect, work tree transfers, a
// RequestPermission long poll. An OIDC ID token has no record: the calls
// it opened end at its exp, so a person an admin disabled at the issuer
// (who gets no new token) keeps no stream past it; likewise a call made
// with a client certificate ends at its NotAfter (CERT_EXPIRED), which a
// handshake alone never checks again. They end UNAUTHENTICATED, with one
// `request refused` audit line each.

// Causes a tracked call's context is canceled with.
var (
	errRevoked   = errors.New("credential revoked")
	errCARetired = errors.New("certificate's CA no longer trusted")
	errLapsed    = errors.New("credential expired") // an ID token's exp, a certificate's NotAfter
	errSignedOut = errors.New("browser session ended")
)

// revokedMemory is how long a revoked hash is remembered: a call
// authenticated just before its record was deleted, and tracked just after
// the deletion was seen, is canceled at once.
const revokedMemory = time.Minute

// openCalls is the calls in flight by credential hash (or by CA pin).
type openCalls struct {
	cause   error // what revoke cancels a call with
	mu      sync.Mutex
	byCred  map[string]map[*trackedCall]struct{}
	revoked map[string]time.Time // hash -> when its deletion was seen
}

func newOpenCalls(cause error) *openCalls {
	return &openCalls{cause: cause, byCred: map[string]map[*trackedCall]struct{}{}, revoked: map[string]time.Time{}}
}

// track cancels c (with cause o.cause) when cred is revoked, at once if it
// already was, until untrack. The call's context is the caller's: one
// serves every openCalls a call is tracked by.
func (o *openCalls) track(cred string, c *trackedCall) {
	o.mu.Lock()
	if _, gone := o.revoked[cred]; gone {
		o.mu.Unlock()
		c.cancel(o.cause)
		return
	}
	if o.byCred[cred] == nil {
		o.byCred[cred] = map[*trackedCall]struct{}{}
	}
	o.byCred[cred][c] = struct{}{}
	o.mu.Unlock()
}

// untrack stops tracking c by cred.
func (o *openCalls) untrack(cred string, c *trackedCall) {
	o.mu.Lock()
	delete(o.byCred[cred], c)
	if len(o.byCred[cred]) == 0 {
		delete(o.byCred, cred)
	}
	o.mu.Unlock()
}

// revoke cancels cred's open calls and remembers it for revokedMemory; it
// returns how many calls it ended.
func (o *openCalls) revoke(cred string) int {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for h, at := range o.revoked {
		if now.Sub(at) > revokedMemory {
			delete(o.revoked, h)
		}
	}
	o.revoked[cred] = now
	calls := o.byCred[cred]
	delete(o.byCred, cred)
	for c := range calls {
		c.cancel(o.cause)
	}
	return len(calls)
}

// wasRevoked says whether cred's deletion was seen (within revokedMemory).
func (o *openCalls) wasRevoked(cred string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, gone := o.revoked[cred]
	return gone
}

// creds lists the hashes with open calls.
func (o *openCalls) creds() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Collect(maps.Keys(o.byCred))
}

// watchRevocations ends the open calls of each credential revoked, on any
// replica, until ctx ends.
func (s *Server) watchRevocations(ctx context.Context) {
	opened := func() {
		s.authn.Watching(true)
		s.recheckOpenCalls(ctx)
	}
	s.store.WatchRevocations(ctx, opened, func() { s.authn.Watching(false) }, s.revokeCalls)
}

// watchSignOuts ends the open calls of each browser session that ends
// (signed out, or expired), through any replica, until ctx ends.
func (s *Server) watchSignOuts(ctx context.Context) {
	s.store.FollowWebGrantEnds(ctx, web.SessionGrants, func(session string) {
		if n := s.webCalls.revoke(session); n > 0 {
			s.lg.Info("open calls of an ended browser session ended", zap.Int("calls", n))
		}
	})
}

// revokeCalls ends cred's open calls and drops its cached record (after
// remembering it as revoked, which a concurrent look-up checks).
func (s *Server) revokeCalls(cred string) {
	if cred == "" {
		return
	}
	n := s.calls.revoke(cred)
	s.authn.Revoked(cred)
	if n > 0 {
		s.lg.Info("open calls of a revoked credential ended", zap.Int("calls", n))
	}
}

// revokeNode deletes node's credential and, on this replica at once, ends
// its stream and calls (every replica's revocation watch ends the calls
// there). It says whether the node had a credential.
func (s *Server) revokeNode(ctx context.Context, node string) (bool, error) {
	cred, err := s.store.RevokeNode(ctx, node)
	if err != nil {
		return false, err
	}
	s.revokeCalls(cred)
	s.hub.disconnect(node)
	return cred != "", nil
}

// deleteToken deletes the token called name and ends its open calls on
// this replica. It says whether there was one.
func (s *Server) deleteToken(ctx context.Context, name string) (bool, error) {
	cred, err := s.store.DeleteToken(ctx, name)
	if err != nil {
		return false, err
	}
	s.revokeCalls(cred)
	return cred != "", nil
}

// recheckOpenCalls looks up every open call's credential again (the watch
// was just opened: a deletion while it was closed went unseen).
func (s *Server) recheckOpenCalls(ctx context.Context) {
	for _, cred := range s.calls.creds() {
		_, live, err := s.store.LookupToken(ctx, cred)
		if err != nil {
			s.lg.Warn("recheck of open calls' credentials failed", zap.Error(err))
			return
		}
		if !live {
			s.revokeCalls(cred)
		}
	}
}

// trackCall makes ctx end when p's credential is revoked, when the CA of
// its certificate is no longer trusted, or when its ID token or
// certificate expires; the call's done ends that. The credential and the
// CA share one cancelable context (the first cause to come is the one the
// call sees, as with a context each): each is a channel and an entry in
// its parent's map for as long as the call, a long stream, stays open.
func (s *Server) trackCall(ctx context.Context, p authz.Principal) (context.Context, *trackedCall) {
	c := &trackedCall{}
	browser := web.CallerSession(ctx)
	if p.Cred != "" || p.CAPin != "" || browser != "" {
		ctx, c.cancel = context.WithCancelCause(ctx)
		if p.Cred != "" {
			c.by(s.calls, p.Cred)
		}
		if browser != "" {
			c.by(s.webCalls, browser)
		}
		if p.CAPin != "" {
			c.by(s.caCalls, p.CAPin)
			// After tracking: either this sees a set that dropped the CA, or
			// endUntrustedCalls, run after the swap, sees this call.
			if set := s.cas(); set != nil && !slices.Contains(set.Pins(), p.CAPin) {
				s.caCalls.revoke(p.CAPin)
			}
		}
	}
	if !p.Expires.IsZero() {
		ctx, c.lapse = context.WithDeadlineCause(ctx, p.Expires, errLapsed)
	}
	return ctx, c
}

// trackedCall is one call as the openCalls tracking it know it: a struct
// rather than a list of closures, since every call (an append's included)
// makes one.
type trackedCall struct {
	cancel context.CancelCauseFunc // nil: tracked by none
	lapse  context.CancelFunc      // nil: no expiry
	in     [3]struct {             // the openCalls tracking it (credential, browser, CA), and by what
		o   *openCalls
		key string
	}
	n int
}

// by tracks c in o by key.
func (c *trackedCall) by(o *openCalls, key string) {
	c.in[c.n].o, c.in[c.n].key = o, key
	c.n++
	o.track(key, c)
}

// done stops tracking the call and releases its contexts.
func (c *trackedCall) done() {
	if c.lapse != nil {
		c.lapse()
	}
	if c.cancel != nil {
		c.cancel(nil)
	}
	for i := c.n - 1; i >= 0; i-- {
		c.in[i].o.untrack(c.in[i].key, c)
	}
}

// endUntrustedCalls ends the open calls made with a certificate from a CA
// set no longer trusts (retired, or replaced with --ca-replace).
func (s *Server) endUntrustedCalls(set *catrust.Set) {
	trusted := set.Pins()
	for _, pin := range s.caCalls.creds() {
		if slices.Contains(trusted, pin) {
			continue
		}
		if n := s.caCalls.revoke(pin); n > 0 {
			s.lg.Info("open calls of a no longer trusted CA's certificates ended", zap.String("ca_pin", pin), zap.Int("calls", n))
		}
	}
}

// revokedErr is the refusal of a call whose credential was revoked, whose
// certificate's CA was retired, or whose ID token expired while it ran
// (nil when none was); parent is the call's own context.
func (s *Server) revokedErr(parent, tracked context.Context, p authz.Principal, method string) error {
	var err error
	switch cause := context.Cause(tracked); {
	case errors.Is(cause, errRevoked):
		err = authz.Unauthenticated("the credential of %s was revoked while this call was open; ask an admin for a new one", p)
	case errors.Is(cause, errSignedOut):
		err = errs.New(errs.KindUnauthenticated, errs.ReasonSignedOut, "this browser signed out (or its session expired) while this call was open; sign in again")
	case errors.Is(cause, errCARetired):
		err = errs.New(errs.KindUnauthenticated, errs.ReasonCertUntrusted,
			"the client certificate of %s is from a CA this control plane stopped trusting (retired) while this call was open: a node joins again with a new join token, a user runs `cast token cert` with a token", p)
	case errors.Is(cause, errLapsed) && p.CAPin != "":
		err = errs.New(errs.KindUnauthenticated, errs.ReasonCertExpired,
			"the client certificate of %s expired at %s while this call was open; a node renews its own before then (its new calls carry the new one), a user runs `cast token cert`", p, p.Expires.UTC().Format(time.RFC3339))
	case errors.Is(cause, errLapsed):
		err = errs.New(errs.KindUnauthenticated, errs.ReasonOIDCExpired,
			"the OIDC ID token of %s expired at %s while this call was open; get a new one from your identity provider", p, p.Expires.UTC().Format(time.RFC3339))
	default:
		return nil
	}
	return s.refused(parent, &p, method, err)
}
