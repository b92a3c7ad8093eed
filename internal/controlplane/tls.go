package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/store"
)

// TLS (--tls): the control plane's CA is made on the store's first start
// and kept there, its key sealed with the secrets key, so every replica
// serves certificates from the same CA. Each replica issues itself
// server certificates, renewed at two thirds of their lifetime
// (pki.Issuer). Clients trust the CA by file (CAST_CACERT,
// DATA_DIR/ca.pem) or by pin (`node --ca-pin`, which the control plane
// logs).

// Defaults.
const (
	DefaultCATTL         = 10 * 365 * 24 * time.Hour
	DefaultServerCertTTL = 90 * 24 * time.Hour
	// CAFileName is the CA certificate's file in the data dir (public).
	CAFileName = "ca.pem"
)

// TLSConfig configures TLS on the gRPC listener.
type TLSConfig struct {
	Enabled bool
	// Hosts are extra names or IPs for the server certificate (it always
	// has pki.ServerName, which clients verify, and the listen host).
	Hosts   []string
	CertTTL time.Duration
	// NodeCertTTL and UserCertTTL are client certificates' lifetimes
	// (mtls.go); nodes renew theirs at two thirds.
	NodeCertTTL time.Duration
	UserCertTTL time.Duration
}

// Validate checks c.
func (c TLSConfig) Validate() error {
	for _, d := range []struct {
		flag string
		ttl  time.Duration
	}{{"--node-cert-ttl", c.NodeCertTTL}, {"--user-cert-ttl", c.UserCertTTL}} {
		if d.ttl < 3*time.Second || d.ttl > maxClientCertTTL {
			return fmt.Errorf("%s %s must be between 3s and %s", d.flag, d.ttl, maxClientCertTTL)
		}
	}
	return nil
}

// caAAD binds the sealed CA key to its purpose.
var caAAD = []byte("cast/tls-ca-key")

// loadTLS returns the listener's TLS config, or nil without --tls.
func (s *Server) loadTLS(ctx context.Context) (*tls.Config, error) {
	if !s.cfg.TLS.Enabled {
		return nil, nil
	}
	box, err := s.openBox()
	if err != nil {
		return nil, err
	}
	if box == nil {
		return nil, errors.New("--tls keeps the CA key sealed: give --secrets-key-file")
	}
	rec, ok, err := s.store.GetCA(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		certPEM, keyDER, err := pki.NewCA(DefaultCATTL)
		if err != nil {
			return nil, err
		}
		sealed, err := box.Seal(keyDER, caAAD)
		if err != nil {
			return nil, err
		}
		if err := s.store.PutCAIfAbsent(ctx, store.CARecord{CertPEM: certPEM, SealedKey: sealed}); err != nil {
			return nil, err
		}
		if rec, _, err = s.store.GetCA(ctx); err != nil {
			return nil, err
		}
	}
	keyDER, err := box.Open(rec.SealedKey, caAAD)
	if err != nil {
		return nil, fmt.Errorf("the TLS CA key: %w (is this the secrets key the CA was sealed with?)", err)
	}
	ca, err := pki.LoadCA(rec.CertPEM, keyDER)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(s.cfg.Listen)
	ttl := s.cfg.TLS.CertTTL
	if ttl <= 0 {
		ttl = DefaultServerCertTTL
	}
	is, err := pki.NewIssuer(ca, append([]string{host, "localhost", "127.0.0.1"}, s.cfg.TLS.Hosts...), ttl)
	if err != nil {
		return nil, err
	}
	s.ca, s.caPin = ca, pki.Pin(ca.Cert)
	if s.cfg.DataDir != "" {
		s.caFile = filepath.Join(s.cfg.DataDir, CAFileName)
		if err := fsutil.WriteFileAtomic(s.caFile, ca.CertPEM, 0o644); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("write %s: %w", s.caFile, err)
		}
	}
	s.lg.Info("tls on", zap.String("ca_pin", s.caPin), zap.String("ca_file", s.caFile), zap.Duration("cert_ttl", ttl))
	return is.ServerConfig(), nil
}

// CAPin is the pin of the TLS CA ("" without --tls).
func (s *Server) CAPin() string { return s.caPin }

// CAFile is where the TLS CA certificate was written ("" without --tls
// or a data dir).
func (s *Server) CAFile() string { return s.caFile }
