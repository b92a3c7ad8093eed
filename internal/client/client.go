// Package client dials the control plane for the cast CLI and node daemons.
// It speaks gRPC to the control plane (and OIDC over HTTP for `cast
// login`): nothing here links etcd.
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// DefaultAddr is where `controlplane --dev` listens.
const DefaultAddr = "127.0.0.1:7777"

// gRPC message limits every client dials with. The control plane takes
// requests of MaxRequestBytes unless its config lowers that
// (controlplane.Config.MaxRecvBytes, which its Validate holds only to the
// store's largest message, not to this); its config bounds its pages so no
// reply passes MaxReplyBytes.
const (
	MaxRequestBytes = 16 << 20
	MaxReplyBytes   = 64 << 20
)

// Client holds the API stubs over one connection (Redial replaces it).
type Client struct {
	conn     *swapConn
	Sessions castv1.SessionServiceClient
	Nodes    castv1.NodeServiceClient
	// Migrations moves sessions between nodes.
	Migrations castv1.MigrationServiceClient
	// Accounts manages fleet accounts.
	Accounts castv1.AccountServiceClient
	// Auth manages tokens and node credentials.
	Auth castv1.AuthServiceClient
	// Version reports the serving replica's build.
	Version castv1.VersionServiceClient
	// Agents keeps the agent CLIs' conformance verdicts.
	Agents castv1.AgentServiceClient
}

// Dial connects lazily to addr (no I/O until the first call) without a
// credential: only public calls (health, JoinNode) pass.
func Dial(addr string) (*Client, error) { return dial(addr, connectParams(Options{})) }

// DialToken is Dial with a bearer token on every call.
func DialToken(addr, token string) (*Client, error) {
	return DialCreds(addr, NewToken(token))
}

// DialCreds is Dial with a token that may change later (a node sets its
// credential once it has joined).
func DialCreds(addr string, t *Token) (*Client, error) {
	return DialOpts(addr, Options{Token: t})
}

// Options say how to dial.
type Options struct {
	Token *Token      // bearer token; nil for none
	TLS   *tls.Config // nil: plaintext (see internal/pki for configs)
	// RetryExpiredCert redials and retries a call once when the control
	// plane refuses the connection's certificate as expired: the TLS
	// config re-reads a certificate file a node renews (a `cast mcp` an
	// agent runs outlives its node's certificate).
	RetryExpiredCert bool
	// Bundle, when set, follows the control plane's trust bundle (a CA
	// rotation): bundle.go.
	Bundle *BundleSync
	// RedialMax, when set, caps the pause between the connection's
	// redials of an unreachable control plane below the default (2 s,
	// jittered by ±20%). Calls fail at once while it is away and keep
	// failing until a redial reaches it, so a node passes its
	// --reconnect-max: none of its calls notices a control plane back
	// later than that.
	RedialMax time.Duration
}

// The connection's redial backoff: the first pause, the longest, each
// varied by up to ±redialJitter of itself.
const (
	redialMin    = 200 * time.Millisecond
	redialMax    = 2 * time.Second
	redialJitter = 0.2
)

// connectParams is the connection's redial backoff under o: gRPC's own
// grows to two minutes, longer than callers retrying through a restart
// wait.
func connectParams(o Options) grpc.ConnectParams {
	longest := redialMax
	if o.RedialMax > 0 {
		// gRPC jitters the capped pause, so the cap leaves room for it.
		longest = min(longest, time.Duration(float64(o.RedialMax)/(1+redialJitter)))
	}
	return grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: min(redialMin, longest), Multiplier: 1.6,
		Jitter: redialJitter, MaxDelay: longest}, MinConnectTimeout: 5 * time.Second}
}

// DialOpts dials addr with o.
func DialOpts(addr string, o Options) (*Client, error) {
	var extra []grpc.DialOption
	if o.Token != nil {
		extra = append(extra, grpc.WithPerRPCCredentials(o.Token))
		if o.Token.forget != nil {
			extra = append(extra, grpc.WithChainUnaryInterceptor(o.Token.forgetRefused))
		}
	}
	if o.TLS != nil {
		extra = append(extra, grpc.WithTransportCredentials(credentials.NewTLS(o.TLS)))
		if o.Bundle != nil {
			extra = append(extra, grpc.WithChainUnaryInterceptor(o.Bundle.interceptor))
		}
	}
	c, err := dial(addr, connectParams(o), extra...)
	if err == nil {
		c.conn.retryExpired = o.RetryExpiredCert
		if o.Bundle != nil {
			o.Bundle.c = c
		}
	}
	return c, err
}

// Token is a bearer token sent as "authorization: Bearer <token>" on
// every call; Set replaces it for later calls. The link has no TLS yet
// (docs/architecture.md), so it does not demand transport security: run
// off loopback only on a network you trust.
type Token struct {
	v atomic.Pointer[bearer]
	// src, when set, gives the token for each call instead (a context's
	// token-command, which caches it: tokencmd.go).
	src func(context.Context) (string, error)
	// forget drops src's cached token after a refusal.
	forget func()
}

// forgetRefused is a unary interceptor dropping t's cached token when the
// control plane refuses the call as unauthenticated.
func (t *Token) forgetRefused(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) == codes.Unauthenticated {
		t.forget()
	}
	return err
}

// bearer is a token and the call metadata that presents it.
type bearer struct {
	tok string
	md  map[string]string // nil for no token
}

func newBearer(tok string) *bearer {
	if tok == "" {
		return &bearer{}
	}
	return &bearer{tok: tok, md: map[string]string{"authorization": "Bearer " + tok}}
}

// NewToken returns a Token holding tok ("" sends none).
func NewToken(tok string) *Token {
	t := &Token{}
	t.Set(tok)
	return t
}

// Set replaces the token.
func (t *Token) Set(tok string) { t.v.Store(newBearer(tok)) }

// GetRequestMetadata implements credentials.PerRPCCredentials. A set
// token's metadata is built once, not per call: grpc copies the map into
// the call's headers and does not change it.
func (t *Token) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if t.src == nil {
		return t.v.Load().md, nil
	}
	tok, err := t.src(ctx)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return newBearer(tok).md, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (*Token) RequireTransportSecurity() bool { return false }

// serviceConfig has gRPC retry the node's answers the control plane waits
// on (a work tree's import, a workspace request's) while it is unavailable:
// each only stores the answer, so a repeat is harmless. Other calls are
// retried, if at all, by their callers (internal/retry), which know
// whether a repeat is safe.
const serviceConfig = `{"methodConfig": [{
	"name": [{"service": "cast.v1.NodeService", "method": "ReportWorkTree"},
	         {"service": "cast.v1.NodeService", "method": "ReportWorkspace"}],
	"retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.2s", "maxBackoff": "2s",
	                "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

func dial(addr string, cp grpc.ConnectParams, extra ...grpc.DialOption) (*Client, error) {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Laptops sleep and NATs drop idle flows: probe the connection.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxReplyBytes), grpc.MaxCallSendMsgSize(MaxRequestBytes)),
		// Redial a restarted control plane within a couple of seconds.
		grpc.WithConnectParams(cp),
		grpc.WithDefaultServiceConfig(serviceConfig),
	}, extra...)
	newConn, err := connector(addr, opts)
	if err != nil {
		return nil, err
	}
	conn, err := newConn()
	if err != nil {
		return nil, fmt.Errorf("control plane address %q: %w", addr, err)
	}
	sc := &swapConn{dial: newConn}
	sc.cur.Store(conn)
	return &Client{conn: sc, Sessions: castv1.NewSessionServiceClient(sc), Nodes: castv1.NewNodeServiceClient(sc),
		Migrations: castv1.NewMigrationServiceClient(sc), Accounts: castv1.NewAccountServiceClient(sc), Auth: castv1.NewAuthServiceClient(sc),
		Version: castv1.NewVersionServiceClient(sc), Agents: castv1.NewAgentServiceClient(sc)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.close() }

// Redial moves later calls to a new connection, so they handshake again
// (with a renewed client certificate); calls under way finish on the old
// one, which is closed after grace.
func (c *Client) Redial(grace time.Duration) error { return c.conn.redial(grace) }

// swapConn is a connection that Redial can replace under the stubs.
type swapConn struct {
	dial   func() (*grpc.ClientConn, error)
	cur    atomic.Pointer[grpc.ClientConn]
	mu     sync.Mutex
	closed bool
	old    map[*grpc.ClientConn]*time.Timer // replaced, closed after their grace
	// retryExpired: see Options.RetryExpiredCert.
	retryExpired bool
}

// certExpired is the control plane's reason for an expired client
// certificate (errs.ReasonCertExpired; this package links no server code).
const certExpired = "CERT_EXPIRED"

func (s *swapConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cc := s.cur.Load()
	err := cc.Invoke(ctx, method, args, reply, opts...)
	if !s.retryExpired || ReasonOf(err) != certExpired {
		return err
	}
	// Refused before any handler ran, so the retry is safe.
	if rerr := s.redialFrom(cc, time.Second); rerr != nil {
		return err
	}
	return s.cur.Load().Invoke(ctx, method, args, reply, opts...)
}

func (s *swapConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return s.cur.Load().NewStream(ctx, desc, method, opts...)
}

func (s *swapConn) redial(grace time.Duration) error { return s.redialFrom(nil, grace) }

// redialFrom replaces the connection, unless from is set and was replaced
// already (calls refused at once redial once).
func (s *swapConn) redialFrom(from *grpc.ClientConn, grace time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return grpc.ErrClientConnClosing
	}
	if from != nil && s.cur.Load() != from {
		return nil
	}
	conn, err := s.dial()
	if err != nil {
		return err
	}
	old := s.cur.Swap(conn)
	if s.old == nil {
		s.old = map[*grpc.ClientConn]*time.Timer{}
	}
	s.old[old] = time.AfterFunc(grace, func() {
		s.mu.Lock()
		delete(s.old, old)
		s.mu.Unlock()
		old.Close()
	})
	return nil
}

func (s *swapConn) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for old, t := range s.old {
		t.Stop()
		old.Close()
	}
	return s.cur.Load().Close()
}

// ReasonOf returns the google.rpc.ErrorInfo reason of err, or "".
func ReasonOf(err error) string { return errorInfo(err).GetReason() }

// MetadataOf returns the google.rpc.ErrorInfo metadata value key of err,
// or "".
func MetadataOf(err error, key string) string { return errorInfo(err).GetMetadata()[key] }

func errorInfo(err error) *errdetails.ErrorInfo {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
