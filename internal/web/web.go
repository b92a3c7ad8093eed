// Package web serves cast's web timeline: the built app embedded in the
// binary (dist/, made by app/ with Vite and committed like generated code),
// its sign-in (a one-time login link from `cast web`, or OIDC), and the
// API the app calls. The API is the control
// plane's own gRPC server reached through Connect and gRPC-Web, transcoded
// by vanguard onto grpc.Server's handlers: the same handlers, interceptors
// and authorization as every other client, not a second implementation. A
// browser's session cookie names the principal that made its login link,
// or that its ID token named; the control plane's authentication reads it
// from the call's context (Caller) and checks that the link's credential
// is still live, or that the ID token has not expired.
package web

import (
	"fmt"
	"net"
	"time"

	"github.com/cast-dev/cast/internal/netaddr"
)

// Config says where and how the web app is served.
type Config struct {
	// Listen is the HTTP address ("" serves no web app).
	Listen string
	// Plain serves HTTP instead of HTTPS; only on a loopback address
	// (controlplane --dev, as Jupyter does: a browser does not trust
	// cast's own CA), or anywhere with --insecure (AllowPlain).
	Plain bool
	// AllowPlain lets Plain listen off loopback (--insecure).
	AllowPlain bool
	// PublicURL is the app's address as a browser reaches it, for login
	// links ("" : the scheme and Listen's address).
	PublicURL string
	// CodeTTL is how long a login link works if unused.
	CodeTTL time.Duration
	// SessionTTL is how long a browser stays signed in.
	SessionTTL time.Duration
	// OIDCClientSecret is the client secret for the browser's OIDC sign-in
	// at issuers that want one (env CAST_WEB_OIDC_CLIENT_SECRET only);
	// the issuer and client id are the control plane's --oidc-*.
	OIDCClientSecret string
	// CallLimits are, by full method name, the unary methods whose own
	// longest wait passes CallTimeout: a call to one that brings no
	// deadline gets its limit and CallMargin (the control plane's table).
	CallLimits map[string]time.Duration
	// Refusal is the gRPC status the API answers err with (the control
	// plane's toStatus): the listener's own refusals (a body that does not
	// decode, a request that is no RPC, a cross-site call) carry the same
	// codes and reasons as the API's.
	Refusal func(error) error

	// idleTimeout is how long a kept-alive connection may wait for its
	// next request (0: DefaultIdleTimeout).
	idleTimeout time.Duration
}

// Defaults.
const (
	DefaultCodeTTL    = time.Minute
	DefaultSessionTTL = 12 * time.Hour
)

// DefaultConfig serves nothing until Listen is set.
func DefaultConfig() Config {
	return Config{CodeTTL: DefaultCodeTTL, SessionTTL: DefaultSessionTTL}
}

// Validate checks the addresses and the plain-HTTP rule.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--web-listen %q: %w", c.Listen, err)
	}
	if c.Plain && !c.AllowPlain && !netaddr.IsLoopback(c.Listen) {
		return fmt.Errorf("--web-listen %q: plain HTTP is served on loopback only (a session cookie would cross the network in clear); use TLS or a loopback address", c.Listen)
	}
	if c.CodeTTL <= 0 || c.SessionTTL <= 0 {
		return fmt.Errorf("web: login link and session lifetimes must be positive")
	}
	return nil
}
