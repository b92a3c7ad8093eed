package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/validate"
)

type authService struct {
	castv1.UnimplementedAuthServiceServer
	s *Server
}

// BootstrapTokenEnv, when set on a control plane's first start, is the
// value of its first admin token instead of a random one (test harnesses
// and provisioning scripts set it; it is never a flag, which ps shows).
const BootstrapTokenEnv = "CAST_BOOTSTRAP_TOKEN"

// AdminTokenFileName is the bootstrap admin token's file in the data dir.
const AdminTokenFileName = "admin.token"

// Default and largest join token lifetime.
const (
	DefaultJoinTTL = time.Hour
	MaxJoinTTL     = 7 * 24 * time.Hour
	MaxJoinUses    = 1000
)

var roleNames = map[castv1.Role]authz.Role{castv1.Role_ROLE_ADMIN: authz.Admin, castv1.Role_ROLE_USER: authz.User, castv1.Role_ROLE_NODE: authz.Node}

func roleProto(r authz.Role) castv1.Role {
	for k, v := range roleNames {
		if v == r {
			return k
		}
	}
	return castv1.Role_ROLE_UNSPECIFIED
}

// bootstrap makes the first admin token once per store: its value is
// cfg.Auth.BootstrapToken or random, written 0600 to the admin token file
// before it is stored, so a crash between leaves at worst an unused file.
func (s *Server) bootstrap(ctx context.Context) error {
	done, err := s.store.Bootstrapped(ctx)
	if err != nil || done {
		return err
	}
	tok := s.cfg.Auth.BootstrapToken
	if tok == "" {
		if tok, err = authz.NewToken(); err != nil {
			return err
		}
	}
	path := s.cfg.Auth.AdminTokenFile
	switch {
	case path == "" && s.cfg.Auth.BootstrapToken == "":
		return fmt.Errorf("the first admin token needs a file: give --data-dir or --admin-token-file (or set %s)", BootstrapTokenEnv)
	case path != "":
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := fsutil.WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
			return fmt.Errorf("write admin token: %w", err)
		}
	}
	made, err := s.store.Bootstrap(ctx, authz.Hash(tok), "admin")
	if err != nil {
		return err
	}
	if !made && path != "" { // another replica won
		_ = os.Remove(path)
		return nil
	}
	s.lg.Info("first admin token made", zap.String("path", path))
	return nil
}

// IssueNodeCredential makes (or replaces) node name's credential without a
// join token: `controlplane --dev` writes one into its dev node's data dir.
func (s *Server) IssueNodeCredential(ctx context.Context, name string) (string, error) {
	if err := validate.Need(validate.Name, "node", name); err != nil {
		return "", err
	}
	tok, err := authz.NewToken()
	if err != nil {
		return "", err
	}
	return tok, s.store.JoinNode(ctx, "", name, authz.Hash(tok))
}

// TokenLive reports whether hash is a live token of role called name
// (`controlplane --dev` keeps the local user's token while it is).
func (s *Server) TokenLive(ctx context.Context, hash string, role authz.Role, name string) (bool, error) {
	if hash == "" {
		return false, nil
	}
	rec, ok, err := s.store.LookupToken(ctx, hash)
	return ok && rec.Role == string(role) && rec.Name == name, err
}

// ReplaceToken makes a fresh token called name, revoking an older one of
// that name: `controlplane --dev` gives the local user one each start.
func (s *Server) ReplaceToken(ctx context.Context, role authz.Role, name string) (string, error) {
	tok, err := authz.NewToken()
	if err != nil {
		return "", err
	}
	if _, err := s.deleteToken(ctx, name); err != nil {
		return "", err
	}
	return tok, s.store.CreateToken(ctx, authz.Hash(tok), string(role), name)
}

func (h *authService) CreateToken(ctx context.Context, req *castv1.CreateTokenRequest) (*castv1.CreateTokenResponse, error) {
	if err := refuse(validate.Need(validate.Name, "name", req.Name)); err != nil {
		return nil, err
	}
	role := roleNames[req.Role]
	if role != authz.Admin && role != authz.User {
		return nil, invalid("role must be ROLE_ADMIN or ROLE_USER (nodes join with `cast node token create`)")
	}
	tok, err := authz.NewToken()
	if err != nil {
		return nil, toStatus(h.s.lg, errs.Internal(err, "make token"))
	}
	if err := h.s.store.CreateToken(ctx, authz.Hash(tok), string(role), req.Name); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	p := authz.Principal{Role: role, Name: req.Name}
	h.s.lg.Info("token created", zap.String("principal", p.String()), zap.String("by", caller(ctx)))
	return &castv1.CreateTokenResponse{Token: tok, Principal: p.String()}, nil
}

func (h *authService) ListTokens(ctx context.Context, req *castv1.ListTokensRequest) (*castv1.ListTokensResponse, error) {
	page, err := pager(req.PageSize, req.PageToken, "tokens", func(r store.TokenRecord) string { return r.Name })
	if err != nil {
		return nil, err
	}
	list, err := h.s.store.ListTokens(ctx)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	list, next, err := page(list)
	if err != nil {
		return nil, err
	}
	out := &castv1.ListTokensResponse{NextPageToken: next}
	for _, r := range list {
		out.Tokens = append(out.Tokens, &castv1.TokenInfo{Name: r.Name, Role: roleProto(authz.Role(r.Role)),
			CreateTimeUnix: r.Created.Unix(), CreateTime: timestamppb.New(r.Created)})
	}
	return out, nil
}

func (h *authService) DeleteToken(ctx context.Context, req *castv1.DeleteTokenRequest) (*castv1.DeleteTokenResponse, error) {
	if err := refuse(validate.Need(validate.Name, "name", req.Name)); err != nil {
		return nil, err
	}
	found, err := h.s.deleteToken(ctx, req.Name)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	if !found {
		return nil, toStatus(h.s.lg, errs.NotFound("no token named %q (cast token ls)", req.Name).With("name", req.Name))
	}
	h.s.lg.Info("token deleted", zap.String("name", req.Name), zap.String("by", caller(ctx)))
	return &castv1.DeleteTokenResponse{}, nil
}

func (h *authService) CreateJoinToken(ctx context.Context, req *castv1.CreateJoinTokenRequest) (*castv1.CreateJoinTokenResponse, error) {
	// Checked in seconds, before the product in nanoseconds can wrap
	// around (to an hour, say) and pass as another lifetime.
	if req.TtlSeconds < 0 || req.TtlSeconds > int64(MaxJoinTTL/time.Second) {
		return nil, invalid("ttl_seconds must be between 1 and %d", int64(MaxJoinTTL/time.Second))
	}
	ttl := time.Duration(req.TtlSeconds) * time.Second
	if ttl == 0 {
		ttl = DefaultJoinTTL
	}
	if req.Uses < 0 || req.Uses > MaxJoinUses {
		return nil, invalid("uses must be between 0 (one) and %d", MaxJoinUses)
	}
	tok, err := h.s.NewJoinToken(ctx, ttl, int(req.Uses))
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	exp := time.Now().Add(ttl)
	h.s.lg.Info("join token created", zap.Time("expires", exp), zap.String("by", caller(ctx)))
	return &castv1.CreateJoinTokenResponse{Token: tok, ExpireTimeUnix: exp.Unix(), ExpireTime: timestamppb.New(exp)}, nil
}

// JoinNode consumes a join token. An admin token also enrolls a node
// (an admin may make join tokens anyway), which is how test harnesses
// and one-host setups start nodes without a step per node.
func (h *authService) JoinNode(ctx context.Context, req *castv1.JoinNodeRequest) (*castv1.JoinNodeResponse, error) {
	if err := refuse(validate.Need(validate.Name, "name", req.Name)); err != nil {
		return nil, err
	}
	if req.JoinToken == "" {
		return nil, invalid("join_token is required")
	}
	joinHash := authz.Hash(req.JoinToken)
	if rec, ok, err := h.s.store.LookupToken(ctx, joinHash); err != nil {
		return nil, toStatus(h.s.lg, err)
	} else if ok && rec.Role == string(authz.Admin) {
		joinHash = ""
	}
	if len(req.Csr) > 0 {
		if h.s.cas() == nil {
			return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonTLSRequired,
				"joining with a certificate needs TLS: this control plane serves plaintext (--insecure)"))
		}
		if _, err := pki.ParseCSR(req.Csr); err != nil { // before the join token is spent
			return nil, invalid("csr: %v", err)
		}
	}
	// With a CSR the credential is never handed out: its hash is the
	// record the node's certificate is bound to.
	cred, err := authz.NewToken()
	if err != nil {
		return nil, toStatus(h.s.lg, errs.Internal(err, "make token"))
	}
	credHash := authz.Hash(cred)
	if err := h.s.store.JoinNode(ctx, joinHash, req.Name, credHash); err != nil {
		if e, ok := errs.As(err); ok && e.Kind == errs.KindUnauthenticated {
			return nil, h.s.refused(ctx, nil, castv1.AuthService_JoinNode_FullMethodName, err)
		}
		return nil, toStatus(h.s.lg, err)
	}
	if len(req.Csr) == 0 {
		h.s.lg.Info("node joined", zap.String("node", req.Name))
		return &castv1.JoinNodeResponse{Credential: cred}, nil
	}
	chain, exp, bundle, err := h.s.signClient(ctx, authz.Principal{Role: authz.Node, Name: req.Name, Cred: credHash}, req.Csr)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	h.s.lg.Info("node joined", zap.String("node", req.Name), zap.Bool("certificate", true), zap.Time("expires", exp))
	return &castv1.JoinNodeResponse{Certificate: chain, CaBundle: bundle}, nil
}

// RevokeNode deletes the node's credential and, on this replica at once,
// ends its stream and calls and forgets its cached record, so the next
// call with it is refused; every replica's revocation watch
// (revocation.go) does the same there.
func (h *authService) RevokeNode(ctx context.Context, req *castv1.RevokeNodeRequest) (*castv1.RevokeNodeResponse, error) {
	if err := refuse(validate.Need(validate.Name, "name", req.Name)); err != nil {
		return nil, err
	}
	had, err := h.s.revokeNode(ctx, req.Name)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	h.s.lg.Info("node credential revoked", zap.String("node", req.Name), zap.Bool("had_credential", had), zap.String("by", caller(ctx)))
	return &castv1.RevokeNodeResponse{Revoked: had}, nil
}

func (h *authService) WhoAmI(ctx context.Context, _ *castv1.WhoAmIRequest) (*castv1.WhoAmIResponse, error) {
	p, ok := authz.FromContext(ctx)
	if !ok {
		return nil, toStatus(h.s.lg, errors.New("no principal"))
	}
	return &castv1.WhoAmIResponse{Principal: p.String(), Role: roleProto(p.Role)}, nil
}

func caller(ctx context.Context) string {
	if p, ok := authz.FromContext(ctx); ok {
		return p.String()
	}
	return "anonymous"
}
