package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Why dialing an external etcd failed, for errors.Is; the message says
// what to fix.
var (
	ErrEtcdServerCert = errors.New("etcd's server certificate does not verify against --etcd-cacert")
	ErrEtcdClientCert = errors.New("etcd refused the client certificate")
	ErrEtcdAuth       = errors.New("etcd refused the user or password")
)

// DefaultDialTimeout bounds the first connection to etcd.
const DefaultDialTimeout = 5 * time.Second

// Access is how the store reaches etcd beyond its endpoints: client TLS
// (verify the server against CACert; present Cert and Key for etcd's
// --client-cert-auth) and etcd's own user auth. The zero value is a
// plaintext connection without auth (the embedded etcd).
type Access struct {
	CACert string // PEM file of the CA etcd's server certificate chains to
	Cert   string // PEM client certificate; with Key
	Key    string // PEM key of Cert; not world-readable
	User   string
	// Password of User, from PasswordFile (0600) or the environment;
	// never a flag: flags show in ps.
	Password string
}

// TLS reports whether a secure connection is configured.
func (a Access) TLS() bool { return a.CACert != "" || a.Cert != "" || a.Key != "" }

// Validate checks a against endpoints before anything dials.
func (a Access) Validate(endpoints []string) error {
	if (a.Cert == "") != (a.Key == "") {
		return errors.New("--etcd-cert and --etcd-key go together")
	}
	if (a.User == "") != (a.Password == "") {
		return errors.New("--etcd-user needs a password (--etcd-password-file or CAST_ETCD_PASSWORD) and a password needs --etcd-user")
	}
	for _, f := range []string{a.CACert, a.Cert, a.Key} {
		if f == "" {
			continue
		}
		if _, err := os.ReadFile(f); err != nil {
			return fmt.Errorf("etcd TLS: %w", err)
		}
	}
	if a.Key != "" {
		if err := PrivateFile(a.Key, 0o007, "--etcd-key"); err != nil {
			return err
		}
	}
	secure := 0
	for _, ep := range endpoints {
		if strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://") {
			secure++
		}
	}
	switch {
	case secure != 0 && secure != len(endpoints):
		return errors.New("--etcd-endpoints mixes https:// and http://: give one scheme")
	case a.TLS() && secure == 0:
		// clientv3 would silently drop TLS for an http:// endpoint.
		return errors.New("--etcd-cacert, --etcd-cert and --etcd-key need https:// endpoints in --etcd-endpoints")
	}
	return nil
}

// PrivateFile refuses path when its mode has any of the bits in deny
// (0o077: only the owner may read it; 0o007: not world-readable).
func PrivateFile(path string, deny os.FileMode, flag string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if fi.Mode().Perm()&deny != 0 {
		return fmt.Errorf("%s %s has mode %04o: allow no more than %04o (chmod it)", flag, path, fi.Mode().Perm(), 0o777&^deny)
	}
	return nil
}

// ReadPassword reads the password in path (0600; one line, the trailing
// newline dropped).
func ReadPassword(path string) (string, error) {
	if err := PrivateFile(path, 0o077, "--etcd-password-file"); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--etcd-password-file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("--etcd-password-file %s is empty", path)
	}
	return pw, nil
}

// tlsConfig is a's client TLS config, or nil for plaintext.
func (a Access) tlsConfig(endpoints []string) (*tls.Config, error) {
	if !a.TLS() && !(len(endpoints) > 0 && strings.HasPrefix(endpoints[0], "https://")) {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12} // system roots without --etcd-cacert
	if a.CACert != "" {
		pem, err := os.ReadFile(a.CACert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s holds no PEM certificate", a.CACert)
		}
	}
	if a.Cert != "" {
		cert, err := tls.LoadX509KeyPair(a.Cert, a.Key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// clientConfig is the clientv3 config for endpoints with a.
func (a Access) clientConfig(endpoints []string, lg *zap.Logger) (clientv3.Config, error) {
	if err := a.Validate(endpoints); err != nil {
		return clientv3.Config{}, err
	}
	tc, err := a.tlsConfig(endpoints)
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: DefaultDialTimeout,
		TLS:         tc,
		Username:    a.User,
		Password:    a.Password,
		Logger:      etcdClientLogger(lg),
		// Appends are up to MaxBatchBytes plus overhead.
		MaxCallSendMsgSize: 2 << 20,
	}, nil
}

// probeTLS tells why TLS to etcd fails, which clientv3 cannot: its calls
// wait for a ready connection and would only time out. It handshakes
// with each endpoint and sends HTTP/2's preface, so a server that refuses
// the client certificate (in TLS 1.3 after the client's handshake ends)
// says so before a reply. The first endpoint that answers ends the probe;
// endpoints that cannot be reached are left to clientv3.
func probeTLS(ctx context.Context, endpoints []string, tc *tls.Config) error {
	for _, ep := range endpoints {
		err := probeOne(ctx, ep, tc)
		if err == nil || errors.Is(err, ErrEtcdServerCert) || errors.Is(err, ErrEtcdClientCert) {
			return err
		}
	}
	return nil
}

// h2Preface is HTTP/2's client preface and an empty SETTINGS frame.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"

func probeOne(ctx context.Context, ep string, tc *tls.Config) error {
	host := strings.TrimPrefix(ep, "https://")
	ctx, cancel := context.WithTimeout(ctx, DefaultDialTimeout)
	defer cancel()
	cfg := tc.Clone()
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(host)
	}
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", host)
	if err != nil {
		return classifyTLS(ep, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(h2Preface)); err != nil {
		return classifyTLS(ep, err)
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		return classifyTLS(ep, err)
	}
	return nil
}

func classifyTLS(ep string, err error) error {
	var verr *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("%w (%s): %v", ErrEtcdServerCert, ep, verr.Err)
	case errors.As(err, &op) && op.Op == "remote error":
		// The server's alert: bad, unknown or missing certificate.
		return fmt.Errorf("%w (%s): %v; check --etcd-cert/--etcd-key against etcd's --trusted-ca-file", ErrEtcdClientCert, ep, op.Err)
	}
	return fmt.Errorf("etcd %s: %w", ep, err)
}

// dialError explains a failed first call to etcd.
func dialError(err error, a Access) error {
	if errors.Is(err, rpctypes.ErrAuthFailed) {
		return fmt.Errorf("%w %q: %v", ErrEtcdAuth, a.User, err)
	}
	return err
}
