// Package authz decides who may call what: principals (admin, user or
// node, each with a name), bearer tokens (only their hashes are stored) and
// Policy, the type of a table from full RPC method name to Rule, with its
// checks; the control plane fills the table in (its policy.go); and the
// per-principal request, byte and stream limits (Limiter). It knows
// nothing of gRPC: the control plane's interceptors feed it the method, the
// caller and each request message, and map its typed errors to statuses.
package authz

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/errs"
)

// Role is what a principal may do.
type Role string

// Roles.
const (
	Admin Role = "admin" // everything
	User  Role = "user"  // the sessions it created
	Node  Role = "node"  // itself and the sessions it owns
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == Admin || r == User || r == Node }

// Principal is an authenticated caller. A node's Name is its node name,
// taken from its credential and never from a request.
type Principal struct {
	Role Role
	Name string
	// Cred is the hash of the credential record the call was
	// authenticated with (a token's, or the one a client certificate is
	// bound to); a certificate issued to the caller is bound to it too.
	Cred string
	// CAPin is the pin of the CA that signed the client certificate the
	// call came with ("" for a bearer token): retiring that CA ends it.
	CAPin string
	// Expires is when the credential presented lapses: an OIDC ID
	// token's exp, a client certificate's NotAfter (zero for a bearer
	// cast token, whose record lasts until it is revoked): open calls
	// end then.
	Expires time.Time
}

// String is "role:name", as audit lines and session creators name it.
func (p Principal) String() string { return string(p.Role) + ":" + p.Name }

// IsAdmin reports whether p may do everything.
func (p Principal) IsAdmin() bool { return p.Role == Admin }

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the caller, if the call was authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// TokenPrefix starts every token cast makes, so a leaked one is easy to
// find in a scanner and to tell from other secrets.
const TokenPrefix = "cast_"

// NewToken returns a fresh random token (256 bits).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return TokenPrefix + hex.EncodeToString(b), nil
}

// Hash is what is stored for a token: its SHA-256. A token has 256 random
// bits, so no salt or slow hash is needed.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Check is a per-call rule on one request message (each message of a
// stream): a node names only itself, a user touches only its own sessions.
type Check func(ctx context.Context, p Principal, req any) error

// Rule says who may call one method.
type Rule struct {
	// Public methods need no credential (health checks, joining with a
	// join token, which the handler checks).
	Public bool
	// Roles may call the method.
	Roles []Role
	// Check, if set, runs on every request message after the role check.
	Check Check
}

// Policy maps full method names ("/cast.v1.SessionService/GetSession")
// to rules. A method without a rule is refused: new RPCs fail closed.
type Policy map[string]Rule

// Rule returns method's rule, or a refusal if it has none.
func (pol Policy) Rule(method string) (Rule, error) {
	r, ok := pol[method]
	if !ok {
		return Rule{}, Denied(errs.ReasonPermissionDenied, "%s has no authorization rule", method)
	}
	return r, nil
}

// Allow checks the caller against method's rule; p is nil for a call
// without a valid credential.
func (pol Policy) Allow(method string, p *Principal) error {
	r, err := pol.Rule(method)
	if err != nil || r.Public {
		return err
	}
	if p == nil {
		return Unauthenticated("%s needs a credential: pass a token (cast: CAST_TOKEN or a context in ~/.config/cast/config.yaml)", method)
	}
	if !slices.Contains(r.Roles, p.Role) {
		return Denied(errs.ReasonPermissionDenied, "%s may not call %s (allowed: %s)", p, shortMethod(method), roleList(r.Roles))
	}
	return nil
}

// Denied is a PERMISSION_DENIED refusal with reason.
func Denied(reason, format string, args ...any) *errs.Error {
	return errs.New(errs.KindPermissionDenied, reason, format, args...)
}

// Unauthenticated is an UNAUTHENTICATED refusal.
func Unauthenticated(format string, args ...any) *errs.Error {
	return errs.New(errs.KindUnauthenticated, errs.ReasonUnauthenticated, format, args...)
}

func shortMethod(m string) string { return m[strings.LastIndex(m, "/")+1:] }

func roleList(rs []Role) string {
	if len(rs) == 0 {
		return "nobody"
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// ParseBearer returns the token of an "authorization" value "Bearer T".
func ParseBearer(v string) (string, error) {
	scheme, tok, ok := strings.Cut(v, " ")
	tok = strings.TrimSpace(tok) // blanks alone are no token
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		return "", fmt.Errorf("authorization must be \"Bearer <token>\"")
	}
	return tok, nil
}
