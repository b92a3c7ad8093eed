package controlplane

import (
	"context"
	"crypto/tls"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/web"
)

// startWeb serves the web timeline (internal/web) when --web-listen is
// set: its API is this replica's gRPC server itself, transcoded.
func (s *Server) startWeb() error {
	if s.cfg.Web.Listen == "" {
		return nil
	}
	var tlsCfg *tls.Config // HTTPS with the gRPC listener's certificate
	if s.tls != nil {
		tlsCfg = pki.ServeConfig(s.tls.GetCertificate)
	}
	var oidc *web.OIDC // the browser signs in with the issuer the CLI's ID tokens come from
	if s.oidc != nil {
		oidc = &web.OIDC{Issuer: s.cfg.Auth.OIDC.Issuer, ClientID: s.cfg.Auth.OIDC.ClientID,
			ClientSecret: s.cfg.Web.OIDCClientSecret, IDs: s.oidc}
	}
	cfg := s.cfg.Web
	cfg.CallLimits = callLimits
	cfg.Refusal = StatusOf
	var err error
	if s.web, err = web.Start(cfg, s.grpc, s.store, tlsCfg, oidc, s.lg.Named("web")); err != nil {
		return err
	}
	s.lg.Info("web app serving", zap.String("url", s.web.URL()))
	return nil
}

// callLimits are the unary methods whose own longest wait passes the web
// app's default deadline (web.CallTimeout), so a browser's call to one is
// not cut before it answers.
var callLimits = map[string]time.Duration{
	castv1.NodeService_ProbeNode_FullMethodName: probeNodeTimeout,
}

// WebURL is the web app's address ("" when not served).
func (s *Server) WebURL() string {
	if s.web == nil {
		return ""
	}
	return s.web.URL()
}

// webPrincipal is the principal of a browser session (web.Caller), as
// long as the credential it signed in with is still live: revoking the
// token that made the login link signs the browser out on its next call,
// and so does the expiry of the ID token or client certificate it was.
func (s *Server) webPrincipal(ctx context.Context, p authz.Principal) (*authz.Principal, error) {
	if p.Cred == "" { // an OIDC ID token: no record, its exp is its end
		if time.Now().After(p.Expires) {
			return nil, errs.New(errs.KindUnauthenticated, errs.ReasonOIDCExpired, "the ID token this browser signed in with has expired; sign in again")
		}
		return &p, nil
	}
	if !p.Expires.IsZero() && time.Now().After(p.Expires) {
		return nil, errs.New(errs.KindUnauthenticated, errs.ReasonCertExpired, "the client certificate this browser signed in with has expired; renew it (`cast token cert`) and run `cast web` again")
	}
	rec, live, err := s.authn.Lookup(ctx, p.Cred) // through the cache the revocation watch keeps, each read bounded
	if err != nil {
		return nil, err
	}
	if !live || authz.Role(rec.Role) != p.Role || rec.Name != p.Name {
		return nil, authz.Unauthenticated("the credential this browser signed in with was revoked; run `cast web` again")
	}
	return &p, nil
}

// CreateWebLogin makes a one-time login link for the caller.
func (h *authService) CreateWebLogin(ctx context.Context, _ *castv1.CreateWebLoginRequest) (*castv1.CreateWebLoginResponse, error) {
	if h.s.web == nil {
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonNoWebApp,
			"this control plane serves no web app: start it with --web-listen (controlplane --dev does)"))
	}
	p, ok := authz.FromContext(ctx)
	if !ok {
		return nil, toStatus(h.s.lg, authz.Unauthenticated("a login link needs a credential"))
	}
	code, until, err := h.s.web.Logins.NewCode(ctx, p)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.CreateWebLoginResponse{Url: h.s.web.LoginURL(code), ExpireTime: timestamppb.New(until)}, nil
}
