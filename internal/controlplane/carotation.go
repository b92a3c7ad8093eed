package controlplane

import (
	"context"
	"time"

	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/tick"
)

// The TLS trust (what this replica signs and verifies with, and the CA
// rotation's steps) is the catrust core; the control plane follows the
// store's record with it and serves its steps.

// cas is the replica's current set (nil without TLS).
func (s *Server) cas() *catrust.Set {
	if s.trust == nil {
		return nil
	}
	return s.trust.Current()
}

// signingCA is the CA that signs now (the server certificate's issuer).
func (s *Server) signingCA() *pki.CA {
	if set := s.cas(); set != nil {
		return set.Signer
	}
	return nil
}

// rotation is the trust whose CA the rotation steps change; a plaintext
// control plane has none.
func (s *Server) rotation() (*catrust.Manager, error) {
	if s.cas() == nil {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "this control plane serves plaintext (--insecure): it has no CA to rotate")
	}
	return s.trust, nil
}

// reloadCAs follows the store's CA record, so a rotation step on any
// replica reaches this one at once (store.WatchCA), and within every when
// that watch is down.
func (s *Server) reloadCAs(every time.Duration) func(context.Context) {
	return func(ctx context.Context) {
		changed := make(chan struct{}, 1)
		if !s.cfg.TLS.NoCAWatch {
			s.goLoop(func(ctx context.Context) {
				s.store.WatchCA(ctx, func() {
					select {
					case changed <- struct{}{}:
					default: // a reload is pending: it reads the latest record
					}
				})
			})
		}
		tick.Loop{Every: every, Wake: changed}.Run(ctx, func() bool {
			s.trust.Reload(ctx)
			return true
		})
	}
}
