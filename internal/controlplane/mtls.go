package controlplane

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
)

// Client certificates (mTLS). A node makes its own key and gets a
// short-lived certificate for its name: first for a join token (JoinNode
// with a CSR), then for the certificate it holds (IssueCertificate),
// before two thirds of its lifetime pass. A certificate is bound to a
// credential record in the store (its hash is the certificate's subject
// serial number), and every call and every stream heartbeat checks that
// record: `cast node rm`, `cast node revoke` or `cast token rm` refuses
// the certificate at once, not at its expiry. The name always comes from
// the certificate, never from a request.

// Default client certificate lifetimes. A node renews at two thirds, so a
// node off (a laptop shut for a weekend) for less than its lifetime comes
// back without a new join token; past it, it must join again.
const (
	DefaultNodeCertTTL = 7 * 24 * time.Hour
	DefaultUserCertTTL = 30 * 24 * time.Hour
	maxClientCertTTL   = 365 * 24 * time.Hour
)

// certPrincipal returns the caller named by its client certificate; ok is
// false when the call has none (plaintext, or no certificate sent).
func (s *Server) certPrincipal(ctx context.Context) (*authz.Principal, bool, error) {
	pr, found := peer.FromContext(ctx)
	set := s.cas()
	if !found || set == nil {
		return nil, false, nil
	}
	info, isTLS := pr.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.PeerCertificates) == 0 {
		return nil, false, nil
	}
	p, err := s.authn.Cert(ctx, info.State.PeerCertificates, set, time.Now())
	return p, true, err
}

// signClient issues a certificate for csr bound to p's credential record,
// from the signing CA, and records it (carotation.go: a CA is not retired
// under a principal whose latest certificate it signed). It returns the
// chain, its expiry and the trust bundle.
func (s *Server) signClient(ctx context.Context, p authz.Principal, csr []byte) ([]byte, time.Time, []byte, error) {
	set := s.cas()
	if set == nil {
		return nil, time.Time{}, nil, errs.New(errs.KindFailedPrecondition, errs.ReasonTLSRequired,
			"client certificates need TLS: this control plane serves plaintext (--insecure)")
	}
	if !set.Signs() {
		// Its certificate would be refused at once, everywhere.
		return nil, time.Time{}, nil, errs.New(errs.KindUnavailable, errs.ReasonUnavailable,
			"this replica signs with a retired CA (it cannot load the store's CA record): retry on another replica")
	}
	ttl := s.cfg.TLS.UserCertTTL
	if p.Role == authz.Node {
		ttl = s.cfg.TLS.NodeCertTTL
	}
	chain, err := set.Signer.SignClient(csr, pki.Identity{Role: string(p.Role), Name: p.Name, Cred: p.Cred,
		NodeMetrics: p.Role == authz.Node}, ttl)
	if err != nil {
		return nil, time.Time{}, nil, errs.Invalid("csr: %v", err)
	}
	leaf, err := pki.ParseCert(chain)
	if err != nil {
		return nil, time.Time{}, nil, errs.Internal(err, "parse issued certificate")
	}
	// Now, not the leaf's NotBefore: certificate times are whole seconds,
	// and a renewal just after `cast ca rotate` must count as after it.
	issued := time.Now()
	if err := s.store.RecordCertIssue(ctx, catrust.CertIssue{Cred: p.Cred, Role: string(p.Role), Name: p.Name,
		IssuerPin: pki.Pin(set.Signer.Cert), Issued: issued, Expires: leaf.NotAfter, Trusts: set.Pins()}); err != nil {
		return nil, time.Time{}, nil, err
	}
	return chain, leaf.NotAfter, set.Bundle, nil
}

func (h *authService) IssueCertificate(ctx context.Context, req *castv1.IssueCertificateRequest) (*castv1.IssueCertificateResponse, error) {
	p, ok := authz.FromContext(ctx)
	if !ok {
		return nil, toStatus(h.s.lg, errors.New("no principal"))
	}
	if p.Cred == "" { // an OIDC ID token: no record to bind a certificate to
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonCertNoCredential,
			"%s signed in with an OIDC ID token, which has no cast credential to bind a certificate to: keep using the ID token, or ask an admin for a cast token", p))
	}
	chain, exp, bundle, err := h.s.signClient(ctx, p, req.Csr)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	h.s.lg.Info("client certificate issued", zap.String("principal", p.String()), zap.Time("expires", exp))
	return &castv1.IssueCertificateResponse{Certificate: chain, ExpireTimeUnix: exp.Unix(), ExpireTime: timestamppb.New(exp), CaBundle: bundle}, nil
}
