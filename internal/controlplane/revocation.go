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
)

// Revocation reaches calls already open. Every call made with a credential
// record (a cast token, or a client certificate bound to one; an OIDC ID
// token has none and lapses at its exp) is tracked by the record's hash
// while it runs. Each replica follows the records in etcd
// (store.WatchRevocations), so a revocation written through any replica
// cancels that principal's open calls on every replica within the watch's
// latency: WatchSession, ExportSession, a node's Connect, work tree
// transfers, a RequestPermission long poll. They end UNAUTHENTICATED, with
// one `request refused` audit line each.

// errRevoked is the cause a tracked call's context is canceled with.
var errRevoked = errors.New("credential revoked")

// revokedMemory is how long a revoked hash is remembered: a call
// authenticated just before its record was deleted, and tracked just after
// the deletion was seen, is canceled at once.
const revokedMemory = time.Minute

// openCalls is the calls in flight by credential hash.
type openCalls struct {
	mu      sync.Mutex
	byCred  map[string]map[*context.CancelCauseFunc]struct{}
	revoked map[string]time.Time // hash -> when its deletion was seen
}

func newOpenCalls() *openCalls {
	return &openCalls{byCred: map[string]map[*context.CancelCauseFunc]struct{}{}, revoked: map[string]time.Time{}}
}

// track returns ctx canceled (cause errRevoked) when cred is revoked, and
// the func that stops tracking it.
func (o *openCalls) track(ctx context.Context, cred string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	o.mu.Lock()
	if _, gone := o.revoked[cred]; gone {
		o.mu.Unlock()
		cancel(errRevoked)
		return ctx, func() {}
	}
	if o.byCred[cred] == nil {
		o.byCred[cred] = map[*context.CancelCauseFunc]struct{}{}
	}
	o.byCred[cred][key] = struct{}{}
	o.mu.Unlock()
	return ctx, func() {
		o.mu.Lock()
		delete(o.byCred[cred], key)
		if len(o.byCred[cred]) == 0 {
			delete(o.byCred, cred)
		}
		o.mu.Unlock()
		cancel(nil)
	}
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
	for cancel := range calls {
		(*cancel)(errRevoked)
	}
	return len(calls)
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
	s.store.WatchRevocations(ctx, func() { s.recheckOpenCalls(ctx) }, s.revokeCalls)
}

func (s *Server) revokeCalls(cred string) {
	if n := s.calls.revoke(cred); n > 0 {
		s.lg.Info("open calls of a revoked credential ended", zap.Int("calls", n))
	}
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

// trackCall makes ctx end when p's credential is revoked (a principal with
// no credential record, from an OIDC ID token, is not tracked).
func (s *Server) trackCall(ctx context.Context, p authz.Principal) (context.Context, func()) {
	if p.Cred == "" {
		return ctx, func() {}
	}
	return s.calls.track(ctx, p.Cred)
}

// revokedErr is the refusal of a call whose credential was revoked while
// it ran (nil when it was not); parent is the call's own context.
func (s *Server) revokedErr(parent, tracked context.Context, p authz.Principal, method string) error {
	if !errors.Is(context.Cause(tracked), errRevoked) {
		return nil
	}
	return s.refused(parent, &p, method, authz.Unauthenticated("the credential of %s was revoked while this call was open; ask an admin for a new one", p))
}
