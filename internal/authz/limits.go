package authz

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/cast-dev/cast/internal/errs"
)

// Per-principal limits keep one user from starving the others: a request
// rate and an append byte rate (token buckets) and a cap on open streams
// (watch, export). They
// apply to users only: nodes' traffic is bounded by the sessions they own
// (and a limit there would stall turns), and admins are trusted.

// Reasons of limit refusals (RESOURCE_EXHAUSTED).
const (
	ReasonRateLimited    = "RATE_LIMITED"
	ReasonTooManyStreams = "TOO_MANY_STREAMS"
	ReasonAppendLimited  = "APPEND_RATE_LIMITED"
)

// Limits bounds one user.
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

// DefaultLimits are generous for a person and a script or two.
func DefaultLimits() Limits {
	return Limits{Rate: 50, Burst: 200, Streams: 32, AppendBytes: 4 << 20, AppendBurst: 64 << 20}
}

// Validate checks l.
func (l Limits) Validate() error {
	if l.Rate <= 0 || l.Burst < 1 || l.Streams < 1 || l.AppendBytes <= 0 || l.AppendBurst < 1 {
		return fmt.Errorf("user limits must be positive (rate %v, burst %d, streams %d, append bytes %v, append burst %d)",
			l.Rate, l.Burst, l.Streams, l.AppendBytes, l.AppendBurst)
	}
	return nil
}

// Limiter applies Limits per user. It is safe for concurrent use.
type Limiter struct {
	l       Limits
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	bytes   map[string]*rate.Limiter
	streams map[string]int
}

// NewLimiter returns a Limiter for l.
func NewLimiter(l Limits) *Limiter {
	return &Limiter{l: l, buckets: map[string]*rate.Limiter{}, bytes: map[string]*rate.Limiter{}, streams: map[string]int{}}
}

func limited(p Principal) bool { return p.Role == User }

// Allow takes one request of p's rate.
func (lm *Limiter) Allow(p Principal) error {
	if !limited(p) {
		return nil
	}
	if !lm.bucket(lm.buckets, p.Name, lm.l.Rate, lm.l.Burst).Allow() {
		return errs.New(errs.KindResourceExhausted, ReasonRateLimited,
			"%s sent more than %v requests per second; slow down and retry", p, lm.l.Rate)
	}
	return nil
}

// AllowAppend takes n bytes of p's append rate.
func (lm *Limiter) AllowAppend(p Principal, n int) error {
	if !limited(p) || n == 0 {
		return nil
	}
	if !lm.bucket(lm.bytes, p.Name, lm.l.AppendBytes, lm.l.AppendBurst).AllowN(time.Now(), n) {
		return errs.New(errs.KindResourceExhausted, ReasonAppendLimited,
			"%s appended more than %v bytes per second; slow down and retry", p, lm.l.AppendBytes)
	}
	return nil
}

// bucket returns name's token bucket in m, made on first use.
func (lm *Limiter) bucket(m map[string]*rate.Limiter, name string, r float64, burst int) *rate.Limiter {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	b := m[name]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(r), burst)
		m[name] = b
	}
	return b
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
