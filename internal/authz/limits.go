package authz

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/cast-dev/cast/internal/errs"
)

// Per-principal limits keep one user or node from starving the others: a
// request rate and an append byte rate (token buckets) and a cap on open
// streams (watch, export; a node's Connect and work tree streams). Users
// and nodes have limits of their own (a node relays every turn of the
// sessions it owns, so its defaults are higher); admins are trusted. A
// user and a node of the same name never share a bucket.

// Reasons of limit refusals (RESOURCE_EXHAUSTED).
const (
	ReasonRateLimited    = "RATE_LIMITED"
	ReasonTooManyStreams = "TOO_MANY_STREAMS"
	ReasonAppendLimited  = "APPEND_RATE_LIMITED"
)

// Limits bounds one principal of a role.
type Limits struct {
	Rate    float64 // requests per second, sustained
	Burst   int     // requests at once above the rate
	Streams int     // open server streams (watch, export)
	// AppendBytes is the sustained rate of bytes a user may append
	// (messages sent, imported, first prompts); AppendBurst the most at
	// once, which must hold the largest request.
	AppendBytes float64
	AppendBurst int
}

// DefaultLimits are a user's: generous for a person and a script or two.
func DefaultLimits() Limits {
	return Limits{Rate: 50, Burst: 200, Streams: 32, AppendBytes: 4 << 20, AppendBurst: 64 << 20}
}

// DefaultNodeLimits are a node's: each running turn flushes its rows a few
// times a second, so a node running dozens of turns stays well inside;
// one node looping or flooding is cut off before it starves the others.
func DefaultNodeLimits() Limits {
	return Limits{Rate: 500, Burst: 2000, Streams: 64, AppendBytes: 16 << 20, AppendBurst: 64 << 20}
}

// DefaultPeerLimits hold one peer address's calls made without a
// credential (JoinNode, GetCABundle, GetVersion, health), and apart from
// those its calls whose credential named no one: each costs a store read,
// so a flood of made-up tokens must not reach the store at will. Generous:
// nodes behind one NAT or load balancer share an address. Only Rate and
// Burst apply.
func DefaultPeerLimits() Limits { return Limits{Rate: 20, Burst: 100} }

// maxBuckets is how many buckets a map keeps before buckets back at their
// burst (idle: as good as new) are dropped; anonymous callers are keyed by
// address, which anyone can vary.
const maxBuckets = 4096

// ValidatePeer checks l as peer limits, where only Rate and Burst apply.
func (l Limits) ValidatePeer() error {
	if l.Rate <= 0 || l.Burst < 1 {
		return fmt.Errorf("limits must be positive (rate %v, burst %d)", l.Rate, l.Burst)
	}
	return nil
}

// Validate checks l.
func (l Limits) Validate() error {
	if l.Rate <= 0 || l.Burst < 1 || l.Streams < 1 || l.AppendBytes <= 0 || l.AppendBurst < 1 {
		return fmt.Errorf("limits must be positive (rate %v, burst %d, streams %d, append bytes %v, append burst %d)",
			l.Rate, l.Burst, l.Streams, l.AppendBytes, l.AppendBurst)
	}
	return nil
}

// Limiter applies Limits per principal: users' and nodes' own. It is
// safe for concurrent use.
type Limiter struct {
	users, nodes Limits
	peers        Limits // per address, without a valid credential
	mu           sync.Mutex
	buckets      map[string]*rate.Limiter // by key(p)
	bytes        map[string]*rate.Limiter
	streams      map[string]int
}

// NewLimiter returns a Limiter holding users to users, nodes to nodes and
// each peer address's calls without a valid credential to peers.
func NewLimiter(users, nodes, peers Limits) *Limiter {
	return &Limiter{users: users, nodes: nodes, peers: peers,
		buckets: map[string]*rate.Limiter{}, bytes: map[string]*rate.Limiter{}, streams: map[string]int{}}
}

// limitsOf is p's Limits; false for admins (and anything else unlimited).
func (lm *Limiter) limitsOf(p Principal) (Limits, bool) {
	switch p.Role {
	case User:
		return lm.users, true
	case Node:
		return lm.nodes, true
	}
	return Limits{}, false
}

// key names p's buckets: the role keeps a node and a user of one name apart.
func key(p Principal) string { return p.String() }

// Allow takes one request of p's rate.
func (lm *Limiter) Allow(p Principal) error {
	l, ok := lm.limitsOf(p)
	if !ok {
		return nil
	}
	if !lm.bucket(lm.buckets, key(p), l.Rate, l.Burst).Allow() {
		return errs.New(errs.KindResourceExhausted, ReasonRateLimited,
			"%s sent more than %v requests per second; slow down and retry", p, l.Rate)
	}
	return nil
}

// AllowAnonymous takes one request of the rate of calls without a
// credential from peer (an address).
func (lm *Limiter) AllowAnonymous(peer string) error {
	if !lm.peerBucket("anonymous", peer).Allow() {
		return lm.peerLimited("calls without a credential", peer)
	}
	return nil
}

// AllowFailedCredential takes one of peer's rate of calls whose credential
// named no one (each cost a store read). Its own bucket, as
// the peer limits: joins and health checks from an address do not hold
// back its callers' valid credentials.
func (lm *Limiter) AllowFailedCredential(peer string) error {
	if !lm.peerBucket("failed", peer).Allow() {
		return lm.peerLimited("calls with a credential that names no one", peer)
	}
	return nil
}

// PeekFailedCredential refuses, taking nothing, while peer's rate of
// failed credentials is spent: until it is not, a credential from it is
// not looked up in the store.
func (lm *Limiter) PeekFailedCredential(peer string) error {
	if lm.peerBucket("failed", peer).Tokens() < 1 {
		return lm.peerLimited("calls with a credential that names no one", peer)
	}
	return nil
}

// peerBucket is peer's bucket of kind, at the peer limits.
func (lm *Limiter) peerBucket(kind, peer string) *rate.Limiter {
	// "@" keeps these apart from key(p), which joins role and name with ":".
	return lm.bucket(lm.buckets, kind+"@"+peer, lm.peers.Rate, lm.peers.Burst)
}

func (lm *Limiter) peerLimited(what, peer string) error {
	return errs.New(errs.KindResourceExhausted, ReasonRateLimited,
		"%s from %s came faster than %v per second; slow down and retry", what, peer, lm.peers.Rate)
}

// AllowAppend takes n bytes of p's append rate.
func (lm *Limiter) AllowAppend(p Principal, n int) error {
	l, ok := lm.limitsOf(p)
	if !ok || n == 0 {
		return nil
	}
	if !lm.bucket(lm.bytes, key(p), l.AppendBytes, l.AppendBurst).AllowN(time.Now(), n) {
		return errs.New(errs.KindResourceExhausted, ReasonAppendLimited,
			"%s appended more than %v bytes per second; slow down and retry", p, l.AppendBytes)
	}
	return nil
}

// bucket returns name's token bucket in m, made on first use.
func (lm *Limiter) bucket(m map[string]*rate.Limiter, name string, r float64, burst int) *rate.Limiter {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	b := m[name]
	if b == nil {
		if len(m) >= maxBuckets {
			now := time.Now()
			for k, idle := range m {
				if idle.TokensAt(now) >= float64(idle.Burst()) {
					delete(m, k)
				}
			}
		}
		b = rate.NewLimiter(rate.Limit(r), burst)
		m[name] = b
	}
	return b
}

// OpenStream counts an open stream of p; release ends it.
func (lm *Limiter) OpenStream(p Principal) (release func(), err error) {
	l, ok := lm.limitsOf(p)
	if !ok {
		return func() {}, nil
	}
	k := key(p)
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.streams[k] >= l.Streams {
		return nil, errs.New(errs.KindResourceExhausted, ReasonTooManyStreams,
			"%s has %d streams open (watch, export, node streams), the most allowed; close one first", p, l.Streams)
	}
	lm.streams[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			lm.mu.Lock()
			defer lm.mu.Unlock()
			if lm.streams[k]--; lm.streams[k] == 0 {
				delete(lm.streams, k)
			}
		})
	}, nil
}
