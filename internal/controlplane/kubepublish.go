package controlplane

import (
	"context"
	"time"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/kubeboot"
)

// KubePublisher keeps what nodes and Prometheus need of this control
// plane (its CA bundle, a join token and the CA pin) in the Kubernetes
// namespace it runs in (--publish-k8s; a *kubeboot.Publisher).
type KubePublisher interface {
	Run(ctx context.Context, src kubeboot.Source)
}

// CABundle is the PEM bundle of the CAs this replica trusts and the pin
// of the one that signs ("" without TLS).
func (s *Server) CABundle() ([]byte, string) {
	set := s.cas()
	if set == nil {
		return nil, ""
	}
	return set.Bundle, s.CAPin()
}

// NewJoinToken stores a new join token good for uses joins until ttl ends
// and returns it (CreateJoinToken, and the publisher's renewals).
func (s *Server) NewJoinToken(ctx context.Context, ttl time.Duration, uses int) (string, error) {
	tok, err := authz.NewToken()
	if err != nil {
		return "", errs.Internal(err, "make token")
	}
	if err := s.store.CreateJoinToken(ctx, authz.Hash(tok), ttl, uses); err != nil {
		return "", err
	}
	return tok, nil
}

// JoinTokenUses is how many joins tok has left (0: used up, expired or
// unknown), so the publisher replaces a token nodes used up early.
func (s *Server) JoinTokenUses(ctx context.Context, tok string) (int, error) {
	return s.store.JoinTokenUses(ctx, authz.Hash(tok))
}
