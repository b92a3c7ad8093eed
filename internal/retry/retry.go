// Package retry is cast's one retry policy: how long to pause between
// attempts and when to give up. The pauses come from cenkalti/backoff
// (exponential, jittered); a Policy names them, Do runs an attempt loop
// with them, Pauses hands them to a loop that waits in its own select (a
// wake channel, a stream's end), and Budget paces re-opens of something
// that keeps ending. Named policies are in policies.go.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy is one way of pacing attempts.
type Policy struct {
	Min, Max time.Duration // the first pause; pauses double up to Max, which no jittered pause passes
	Jitter   float64       // each pause varies by up to ±Jitter of itself (0: exact)
	Limit    time.Duration // Do gives up rather than pause past this since its first attempt (0: no limit)
	Tries    uint          // Do gives up after this many attempts (0: no limit)
}

// Pauses is a policy's sequence of pauses, for a loop that waits in its
// own select (a wake channel, a stream's end). Not safe for concurrent use.
type Pauses struct {
	b   backoff.ExponentialBackOff
	max time.Duration
}

// Pauses starts the policy's pauses: Min, doubling up to Max, jittered.
// Limit and Tries are Do's.
func (p Policy) Pauses() *Pauses {
	ps := &Pauses{b: backoff.ExponentialBackOff{InitialInterval: p.Min, MaxInterval: max(p.Max, p.Min),
		Multiplier: 2, RandomizationFactor: p.Jitter}, max: max(p.Max, p.Min)}
	ps.Reset()
	return ps
}

// Next is the next pause. backoff jitters around its capped interval;
// the cap is clamped again so Max stays a ceiling (a node's
// --reconnect-max is the longest it waits).
func (ps *Pauses) Next() time.Duration { return min(ps.b.NextBackOff(), ps.max) }

// Reset starts the pauses again at Min.
func (ps *Pauses) Reset() { ps.b.Reset() }

// NextBackOff makes Pauses a backoff.BackOff, for Do.
func (ps *Pauses) NextBackOff() time.Duration { return ps.Next() }

// Do calls op until it returns nil or an error wrapped by Stop, Tries
// attempts were made, the next pause would pass Limit, or ctx ends.
// notify (may be nil) hears each failure and the pause before the next
// attempt. It returns op's last error (unwrapped from Stop), never ctx's:
// the caller says what failed, and checks ctx itself if it cares.
func Do(ctx context.Context, p Policy, op func() error, notify func(err error, pause time.Duration)) error {
	_, err := Get(ctx, p, func() (struct{}, error) { return struct{}{}, op() }, notify)
	return err
}

// Get is Do for an op that returns a value: the last attempt's.
func Get[T any](ctx context.Context, p Policy, op func() (T, error), notify func(err error, pause time.Duration)) (T, error) {
	var last error
	opts := []backoff.RetryOption{backoff.WithBackOff(p.Pauses()), backoff.WithMaxElapsedTime(p.Limit), backoff.WithMaxTries(p.Tries)}
	if notify != nil {
		opts = append(opts, backoff.WithNotify(notify))
	}
	v, err := backoff.Retry(ctx, func() (T, error) {
		v, err := op()
		last = err
		return v, err
	}, opts...)
	if err == nil {
		return v, nil
	}
	// Given up (or ctx ended): op's own last error says what failed.
	var stop *backoff.PermanentError
	if errors.As(last, &stop) {
		return v, stop.Unwrap()
	}
	return v, last
}

// Stop marks err as one that trying again does not change: Do returns it
// at once.
func Stop(err error) error { return backoff.Permanent(err) }
