package authz

import (
	"fmt"
	"sync"

	"golang.org/x/time/rate"

	"github.com/cast-dev/cast/internal/errs"
)

// Per-principal limits keep one user from starving the others: a request
// rate (token bucket) and a cap on open streams (watch, export). They
// apply to users only: nodes' traffic is bounded by the sessions they own
// (and a limit there would stall turns), and admins are trusted.

// Reasons of limit refusals (RESOURCE_EXHAUSTED).
const (
	ReasonRateLimited    = "RATE_LIMITED"
	ReasonTooManyStreams = "TOO_MANY_STREAMS"
)

// Limits bounds one user.
type Limits struct {
	Rate    float64 // requests per second, sustained
	Burst   int     // requests at once above the rate
	Streams int     // open server streams (watch, export)
}

// DefaultLimits are generous for a person and a script or two.
func DefaultLimits() Limits { return Limits{Rate: 50, Burst: 200, Streams: 32} }

// Validate checks l.
func (l Limits) Validate() error {
	if l.Rate <= 0 || l.Burst < 1 || l.Streams < 1 {
		return fmt.Errorf("user limits must be positive (rate %v, burst %d, streams %d)", l.Rate, l.Burst, l.Streams)
	}
	return nil
}

// Limiter applies Limits per user. It is safe for concurrent use.
type Limiter struct {
	l       Limits
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	streams map[string]int
}

// NewLimiter returns a Limiter for l.
func NewLimiter(l Limits) *Limiter {
	return &Limiter{l: l, buckets: map[string]*rate.Limiter{}, streams: map[string]int{}}
}

func limited(p Principal) bool { return p.Role == User }

// Allow takes one request of p's rate.
func (lm *Limiter) Allow(p Principal) error {
	if !limited(p) {
		return nil
	}
	lm.mu.Lock()
	b := lm.buckets[p.Name]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(lm.l.Rate), lm.l.Burst)
		lm.buckets[p.Name] = b
	}
	lm.mu.Unlock()
	if !b.Allow() {
		return errs.New(errs.KindResourceExhausted, ReasonRateLimited,
			"%s sent more than %v requests per second; slow down and retry", p, lm.l.Rate)
	}
	return nil
}

// OpenStream counts an open stream of p; release ends it.
func (lm *Limiter) OpenStream(p Principal) (release func(), err error) {
	if !limited(p) {
		return func() {}, nil
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.streams[p.Name] >= lm.l.Streams {
		return nil, errs.New(errs.KindResourceExhausted, ReasonTooManyStreams,
			"%s has %d streams open (watch, export), the most allowed; close one first", p, lm.l.Streams)
	}
	lm.streams[p.Name]++
	var once sync.Once
	return func() {
		once.Do(func() {
			lm.mu.Lock()
			defer lm.mu.Unlock()
			if lm.streams[p.Name]--; lm.streams[p.Name] == 0 {
				delete(lm.streams, p.Name)
			}
		})
	}, nil
}
