// Package oidcauth lets people reach the control plane with an OpenID
// Connect ID token as their bearer credential: the token is checked
// against the issuer's discovery document and keys (JWKS), its audience
// must be the configured client id, and one claim names the user. It
// knows nothing of gRPC: it turns a raw token into an authz.Principal or
// a typed refusal (internal/errs).
package oidcauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/netaddr"
	"github.com/cast-dev/cast/internal/validate"
)

// Defaults of the claims read from a token.
const (
	DefaultUsernameClaim = "email"
	DefaultGroupsClaim   = "groups"
)

// Config is the issuer to trust. An empty Issuer turns OIDC off.
type Config struct {
	Issuer   string // --oidc-issuer: the discovery document is Issuer/.well-known/openid-configuration
	ClientID string // --oidc-client-id: a token's audience must contain it
	// UsernameClaim names the user ("user:<claim>"); GroupsClaim holds
	// the groups, and AdminGroup among them makes the user an admin.
	UsernameClaim string
	GroupsClaim   string
	AdminGroup    string
}

// DefaultConfig is OIDC off, with the default claims.
func DefaultConfig() Config {
	return Config{UsernameClaim: DefaultUsernameClaim, GroupsClaim: DefaultGroupsClaim}
}

// Enabled reports whether an issuer is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Validate checks c.
func (c Config) Validate() error {
	if !c.Enabled() {
		if c.ClientID != "" || c.AdminGroup != "" {
			return fmt.Errorf("--oidc-client-id and --oidc-admin-group need --oidc-issuer")
		}
		return nil
	}
	// The keys that make tokens come from there: only TLS keeps a
	// network from handing over its own. Plain http only on loopback.
	if err := netaddr.CheckIssuerURL(c.Issuer); err != nil {
		return fmt.Errorf("--oidc-%w", err) // "--oidc-issuer ... must be"
	}
	if c.ClientID == "" {
		return fmt.Errorf("--oidc-issuer needs --oidc-client-id (the audience its ID tokens are issued for)")
	}
	if c.UsernameClaim == "" {
		return fmt.Errorf("--oidc-username-claim may not be empty")
	}
	if c.AdminGroup != "" && c.GroupsClaim == "" {
		return fmt.Errorf("--oidc-admin-group needs --oidc-groups-claim")
	}
	return nil
}

// retryEvery spaces discovery attempts after a failure, so a burst of
// calls does not become a burst of requests to a down issuer.
const retryEvery = 5 * time.Second

// fetchTimeout bounds one discovery or JWKS request.
const fetchTimeout = 10 * time.Second

// Verifier checks ID tokens. The issuer's discovery document is fetched
// on first need and kept once it is read: an issuer down while the
// control plane starts only delays OIDC logins. Keys are fetched by
// go-oidc, again whenever a token names a key it has not seen (rotation).
type Verifier struct {
	cfg  Config
	lg   *zap.Logger
	http *http.Client

	mu      sync.Mutex
	v       *oidc.IDTokenVerifier
	tried   time.Time
	lastErr error
}

// New returns a Verifier for cfg (which must be Enabled and valid).
func New(cfg Config, lg *zap.Logger) *Verifier {
	return &Verifier{cfg: cfg, lg: lg.Named("oidc"), http: &http.Client{Timeout: fetchTimeout}}
}

// Discover reads the issuer's discovery document unless it was read
// already; a failure is retried on a later call.
func (v *Verifier) Discover(ctx context.Context) error {
	_, err := v.verifier(ctx)
	return err
}

func (v *Verifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.v != nil {
		return v.v, nil
	}
	if !v.tried.IsZero() && time.Since(v.tried) < retryEvery {
		return nil, v.lastErr
	}
	v.tried = time.Now()
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, v.http), v.cfg.Issuer)
	if err != nil {
		v.lastErr = fmt.Errorf("OIDC discovery at %s: %w", v.cfg.Issuer, err)
		v.lg.Warn("OIDC discovery failed; retried on a later token", zap.String("issuer", v.cfg.Issuer), zap.Error(err))
		return nil, v.lastErr
	}
	v.v = p.Verifier(&oidc.Config{ClientID: v.cfg.ClientID})
	v.lg.Info("OIDC issuer discovered", zap.String("issuer", v.cfg.Issuer), zap.String("client_id", v.cfg.ClientID))
	return v.v, nil
}

// Verify returns the user raw names: "user:<claim>", or an admin when
// its groups hold the admin group. A refusal is UNAUTHENTICATED with
// reason OIDC_TOKEN_EXPIRED, OIDC_TOKEN_INVALID or OIDC_CLAIM_INVALID; an
// issuer that cannot be reached is UNAVAILABLE.
func (v *Verifier) Verify(ctx context.Context, raw string) (authz.Principal, error) {
	iv, err := v.verifier(ctx)
	if err != nil {
		return authz.Principal{}, errs.New(errs.KindUnavailable, errs.ReasonUnavailable,
			"cannot check the OIDC token now: %v", err)
	}
	tok, err := iv.Verify(ctx, raw)
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return authz.Principal{}, errs.New(errs.KindUnauthenticated, errs.ReasonOIDCExpired,
			"the OIDC ID token expired at %s; get a new one from your identity provider (a context's token-command runs again by itself)",
			expired.Expiry.UTC().Format(time.RFC3339))
	case err != nil:
		return authz.Principal{}, errs.New(errs.KindUnauthenticated, errs.ReasonOIDCInvalid,
			"the OIDC ID token was refused (this control plane trusts issuer %s for client id %s): %v", v.cfg.Issuer, v.cfg.ClientID, err)
	}
	claims := map[string]any{}
	if err := tok.Claims(&claims); err != nil {
		return authz.Principal{}, claimError("the token's claims: %v", err)
	}
	p, err := v.principal(claims)
	if err != nil {
		return authz.Principal{}, err
	}
	p.Expires = tok.Expiry // the calls it opens end then (controlplane/revocation.go)
	return p, nil
}

// principal reads the user's name and role from a verified token's claims.
func (v *Verifier) principal(claims map[string]any) (authz.Principal, error) {
	c := v.cfg.UsernameClaim
	name, ok := claims[c].(string)
	if !ok || name == "" {
		return authz.Principal{}, claimError("the ID token has no %q claim (a string) to name its user; the control plane reads --oidc-username-claim %s", c, c)
	}
	// An address the issuer has not verified may be anybody's.
	if ev, present := claims["email_verified"]; c == "email" && present && ev != true && ev != "true" {
		return authz.Principal{}, claimError("the ID token's email %s is not verified by the issuer", validate.Show(name))
	}
	if err := validate.Check(validate.UserName, "claim "+c, name); err != nil {
		e, _ := errs.As(err)
		return authz.Principal{}, claimError("%s", e.Msg)
	}
	p := authz.Principal{Role: authz.User, Name: name}
	if v.cfg.AdminGroup != "" && slices.Contains(groups(claims[v.cfg.GroupsClaim]), v.cfg.AdminGroup) {
		p.Role = authz.Admin
	}
	return p, nil
}

func claimError(format string, args ...any) error {
	return errs.New(errs.KindUnauthenticated, errs.ReasonOIDCClaim, format, args...)
}

// groups reads a groups claim: a list of strings, or one string.
func groups(v any) []string {
	switch g := v.(type) {
	case string:
		return []string{g}
	case []any:
		out := make([]string, 0, len(g))
		for _, x := range g {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
