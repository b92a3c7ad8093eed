package controlplane

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/authn"
	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/web"
)

// Every call passes one authorization layer (these interceptors): the
// bearer token in the "authorization" metadata names a principal (a hash
// lookup in the store, so a revoked token fails on its next call; or, with
// --oidc-issuer, an ID token checked against the issuer's keys), the
// method's rule in the policy table (policy.go) says which roles may call
// it, and its per-call check runs on every request message, stream
// messages included. Refusals are UNAUTHENTICATED or PERMISSION_DENIED with
// a reason, and each is an audit log line or counted in the next one
// (refusallog.go). A call stays tracked by its
// credential while it runs, so a revocation ends it (revocation.go).

// authenticate returns the caller named by the call's client certificate
// (mtls.go) or else its bearer token (a cast token, or an OIDC ID token):
// nil without either, an UNAUTHENTICATED error for a malformed, unknown,
// expired or revoked one. limited: a token not cached is looked up in the
// store only while the peer's rate of failed credentials is not spent (a
// stream's check again is not limited).
func (s *Server) authenticate(ctx context.Context, limited bool) (*authz.Principal, error) {
	if p, ok := web.Caller(ctx); ok {
		return s.webPrincipal(ctx, p)
	}
	if p, ok, err := s.certPrincipal(ctx); ok {
		return p, err
	}
	vals := metadata.ValueFromIncomingContext(ctx, "authorization") // no copy of the other headers
	if len(vals) == 0 {
		return nil, nil
	}
	if len(vals) > 1 {
		return nil, authz.Unauthenticated("give one authorization header, not %d", len(vals))
	}
	var miss func() error
	if limited {
		miss = func() error { return s.limits.PeekFailedCredential(peerHost(ctx)) }
	}
	return s.authn.Bearer(ctx, vals[0], miss)
}

// tokenRecords is the store's credential records as authn reads them.
type tokenRecords struct{ st *store.Store }

func (t tokenRecords) LookupRecord(ctx context.Context, hash string) (authn.Record, bool, error) {
	rec, ok, err := t.st.LookupToken(ctx, hash)
	return authn.Record{Role: rec.Role, Name: rec.Name}, ok, err
}

// authorize runs the method-level rule and returns ctx carrying the caller
// and the per-message check (nil for none).
func (s *Server) authorize(ctx context.Context, method string) (context.Context, func(any) error, error) {
	rule, err := s.policy.Rule(method)
	if err != nil {
		if !s.served(method) {
			// A method the server does not have reaches here through
			// the unknown-service handler: say so, not "no rule".
			err = errs.UnknownMethod(method)
		}
		return nil, nil, s.refused(ctx, nil, method, err)
	}
	p, err := s.authenticate(ctx, true)
	if e, ok := errs.As(err); ok && e.Kind == errs.KindUnauthenticated {
		// A credential that names no one cost a store read: it takes
		// from the peer's rate of those (a public call goes on as one
		// without a credential, limited in limit).
		if lerr := s.limits.AllowFailedCredential(peerHost(ctx)); lerr != nil {
			err = lerr
		}
	}
	if err != nil && !rule.Public {
		return nil, nil, s.refused(ctx, nil, method, err)
	}
	if err := s.policy.Allow(method, p); err != nil {
		return nil, nil, s.refused(ctx, p, method, err)
	}
	if p == nil {
		return ctx, nil, nil
	}
	ctx = authz.WithPrincipal(ctx, *p)
	if rule.Check == nil {
		return ctx, nil, nil
	}
	return ctx, func(req any) error {
		if err := rule.Check(ctx, *p, req); err != nil {
			return s.refused(ctx, p, method, err)
		}
		return nil
	}, nil
}

// limit takes one request of the caller's rate, and the bytes it
// appends of its append rate (users and nodes; admins are not limited). A
// call without a credential takes one of its peer address's rate.
func (s *Server) limit(ctx context.Context, method string, req any) error {
	p, ok := authz.FromContext(ctx)
	if !ok {
		if err := s.limits.AllowAnonymous(peerHost(ctx)); err != nil {
			return s.refused(ctx, nil, method, err)
		}
		return nil
	}
	err := s.limits.Allow(p)
	if err == nil {
		err = s.limits.AllowAppend(p, appendBytes(req))
	}
	if err != nil {
		return s.refused(ctx, &p, method, err)
	}
	return nil
}

// appendBytes is how much a request adds to transcripts.
func appendBytes(req any) int {
	switch r := req.(type) {
	case *castv1.SendMessageRequest, *castv1.AppendMessagesRequest, *castv1.CreateSessionRequest,
		*castv1.AppendOwnerMessagesRequest, *castv1.AdoptSessionRequest:
		return proto.Size(r.(proto.Message))
	}
	return 0
}

// refused writes the audit line for a refusal (at most one per peer per
// --refusal-log interval, the rest counted: refusallog.go) and maps it to
// a status.
// Store failures while checking are not refusals and are not audited.
// served says whether the gRPC server has method ("/pkg.Service/Method").
func (s *Server) served(method string) bool {
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	for _, m := range s.grpc.GetServiceInfo()[svc].Methods {
		if m.Name == name {
			return true
		}
	}
	return false
}

func (s *Server) refused(ctx context.Context, p *authz.Principal, method string, err error) error {
	if e, ok := errs.As(err); ok && (e.Kind == errs.KindPermissionDenied || e.Kind == errs.KindUnauthenticated || e.Kind == errs.KindResourceExhausted) {
		who := "anonymous"
		if p != nil {
			who = p.String()
		}
		from := peerHost(ctx)
		if logIt, suppressed := s.refusals.note(from, time.Now()); logIt {
			s.lg.Warn("request refused", zap.String("principal", who), zap.String("method", method),
				zap.String("reason", e.Reason), zap.String("why", e.Msg), zap.String("peer", from), zap.Int("suppressed", suppressed))
		}
	}
	if ctx.Err() != nil {
		return toStatus(s.lg, ctx.Err())
	}
	return toStatus(s.lg, err)
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, check, err := s.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if err := s.limit(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(req); err != nil {
			return nil, err
		}
	}
	p, _ := authz.FromContext(ctx)
	tracked, call := s.trackCall(ctx, p)
	defer call.done()
	resp, err := h(tracked, req)
	if err != nil {
		if rerr := s.revokedErr(ctx, tracked, p, info.FullMethod); rerr != nil {
			return nil, rerr
		}
	}
	s.sendBundleHeader(ctx) // after: a rotation step names its own result
	return resp, err
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, check, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if err := s.limit(ctx, info.FullMethod, nil); err != nil {
		return err
	}
	p, ok := authz.FromContext(ctx)
	if ok {
		release, err := s.limits.OpenStream(p)
		if err != nil {
			return s.refused(ctx, &p, info.FullMethod, err)
		}
		defer release()
	}
	tracked, call := s.trackCall(ctx, p)
	defer call.done()
	err = h(srv, &checkedStream{ServerStream: ss, ctx: tracked, check: check, single: !info.IsClientStream})
	if rerr := s.revokedErr(ctx, tracked, p, info.FullMethod); rerr != nil {
		return rerr
	}
	return err
}

// checkedStream carries the caller and runs the per-call check on every
// message the client sends (a Connect hello names the node, for one).
type checkedStream struct {
	grpc.ServerStream
	ctx   context.Context
	check func(any) error
	// single: the client sends one message (a server stream such as
	// WatchSession). The check is let go once it ran, so a stream open
	// for hours does not keep its closure alive.
	single bool
}

func (c *checkedStream) Context() context.Context { return c.ctx }

func (c *checkedStream) RecvMsg(m any) error {
	if err := c.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	check := c.check
	if c.single && check != nil {
		c.check = oneMessage
	}
	if check != nil {
		return check(m)
	}
	return nil
}

// oneMessage refuses what no handler reads: a second request message of a
// call that takes one.
func oneMessage(any) error { return invalid("this call takes one request message") }

// stillAuthenticated checks a long stream's credential again.
func (s *Server) stillAuthenticated(ctx context.Context) error {
	p, err := s.authenticate(ctx, false)
	if err == nil && p == nil {
		err = authz.Unauthenticated("the stream's credential is gone")
	}
	if err != nil {
		return s.refused(ctx, p, "/cast.v1.NodeService/Connect", err)
	}
	return nil
}
