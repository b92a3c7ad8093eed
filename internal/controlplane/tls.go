package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/pki"
)

// TLS (--tls): the control plane's CA is made on the store's first start
// and kept there, its key sealed with the secrets key, or is an
// operator's (--ca-cert, --ca-key; ca.go); either way every replica
// serves certificates from the same CA. Each replica issues itself
// server certificates, renewed at two thirds of their lifetime
// (pki.Issuer). Clients trust the CA by file (CAST_CACERT,
// DATA_DIR/ca.pem) or by pin (`node --ca-pin`, which the control plane
// logs).

// Defaults.
const (
	DefaultCATTL         = 10 * 365 * 24 * time.Hour
	DefaultServerCertTTL = 90 * 24 * time.Hour
	DefaultCAReload      = 2 * time.Second
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
	// CACertFile and CAKeyFile are an operator's CA (--ca-cert, --ca-key;
	// ca.go), used instead of the generated one.
	CACertFile string
	CAKeyFile  string
	// CAReplace lets a start replace the store's CA by another
	// (--ca-replace): every joined node must join again.
	CAReplace bool
	// CAReload is how often a replica re-reads the store's CA record, so
	// a rotation step on another replica reaches it (carotation.go) when
	// its watch of the record missed it.
	CAReload time.Duration
	// NoCAWatch leaves the reloads to CAReload alone (tests of a replica
	// that has not reloaded a step yet).
	NoCAWatch bool
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
	if (c.CACertFile == "") != (c.CAKeyFile == "") {
		return errors.New("--ca-cert and --ca-key go together: the operator's CA certificate and its private key")
	}
	for _, h := range c.Hosts {
		if strings.EqualFold(h, pki.NodeMetricsName) {
			return fmt.Errorf("--tls-san %s is the name scrapers verify nodes by; the control plane cannot carry it", h)
		}
	}
	if c.CACertFile != "" && !c.Enabled {
		return errors.New("--ca-cert signs TLS certificates: it needs TLS (drop --insecure or --tls=false)")
	}
	return nil
}

// loadTLS returns the listener's TLS config, or nil without --tls.
func (s *Server) loadTLS(ctx context.Context) (*tls.Config, error) {
	if !s.cfg.TLS.Enabled {
		return nil, nil
	}
	rec, ok, err := s.store.GetCA(ctx)
	if err != nil {
		return nil, err
	}
	var opCA *pki.CA // the operator's CA this replica was given
	if s.cfg.TLS.CACertFile != "" && !s.rotatedAway(rec, ok) {
		opCA, err = s.operatorCA(ctx, rec, ok)
	} else {
		_, err = s.generatedCA(ctx, rec, ok)
	}
	if err != nil {
		return nil, err
	}
	if rec, _, err = s.store.GetCA(ctx); err != nil {
		return nil, err
	}
	if s.cfg.DataDir != "" {
		s.caFile = filepath.Join(s.cfg.DataDir, CAFileName)
	}
	s.trust = catrust.New(s.store, catrust.Config{OpCA: opCA, Box: s.openBox, CAFile: s.caFile, CATTL: DefaultCATTL,
		OnChange: s.endUntrustedCalls}, s.lg)
	if err := s.trust.Apply(rec); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(s.cfg.Listen)
	ttl := s.cfg.TLS.CertTTL
	if ttl <= 0 {
		ttl = DefaultServerCertTTL
	}
	is, err := pki.NewIssuer(s.signingCA, append([]string{host, "localhost", "127.0.0.1"}, s.cfg.TLS.Hosts...), ttl)
	if err != nil {
		return nil, err
	}
	metrics.NewCertExpiry(s.reg, map[string]func() *x509.Certificate{
		metrics.CertCA: func() *x509.Certificate { return s.signingCA().Cert },
		metrics.CertServing: func() *x509.Certificate {
			if c, err := is.GetCertificate(nil); err == nil {
				return c.Leaf
			}
			return nil
		},
	})
	reload := s.cfg.TLS.CAReload
	if reload <= 0 {
		reload = DefaultCAReload
	}
	s.goLoop(s.reloadCAs(reload))
	ca := s.signingCA()
	s.lg.Info("tls on", zap.String("ca_pin", s.CAPin()), zap.String("ca_file", s.caFile), zap.Bool("operator_ca", rec.Operator),
		zap.String("ca_subject", ca.Cert.Subject.String()), zap.Time("ca_expires", ca.Cert.NotAfter), zap.Duration("cert_ttl", ttl),
		zap.Int("trusted_cas", len(s.cas().Trusted)))
	return is.ServerConfig(), nil
}

// rotatedAway reports whether --ca-cert names a CA a rotation has moved
// the store away from (`cast ca activate`): the store's CA signs, and the
// flags are stale (a warning, not a refusal, so a replica restarted with
// its old unit file still serves).
func (s *Server) rotatedAway(rec catrust.Record, ok bool) bool {
	if !ok || rec.Operator {
		return false
	}
	ca, err := ReadOperatorCA(s.cfg.TLS.CACertFile, s.cfg.TLS.CAKeyFile, time.Now())
	if err != nil {
		return false // refused with the reason by operatorCA
	}
	pin := pki.Pin(ca.Cert)
	moved := false
	for _, o := range rec.Others {
		moved = moved || catrust.StoredPin(catrust.Record{CertPEM: o.CertPEM}) == pin
	}
	for _, r := range rec.Retired {
		moved = moved || r.Pin == pin
	}
	if moved {
		s.lg.Warn("--ca-cert names a CA this store rotated away from (cast ca activate): serving the store's CA; drop --ca-cert/--ca-key",
			zap.String("ca_cert_pin", pin), zap.String("store_ca_pin", catrust.StoredPin(rec)))
	}
	return moved
}

// CAPin is the pin of the TLS CA that signs now ("" without --tls): a
// node's first contact (--ca-pin) must name it.
func (s *Server) CAPin() string {
	if ca := s.signingCA(); ca != nil {
		return pki.Pin(ca.Cert)
	}
	return ""
}

// CAFile is where the TLS CA certificate was written ("" without --tls
// or a data dir).
func (s *Server) CAFile() string { return s.caFile }
