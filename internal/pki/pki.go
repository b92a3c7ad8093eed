// Package pki is the control plane's certificate authority: a CA made on
// first start (its key sealed in the store by the caller), server
// certificates for the gRPC listener, and the TLS configs clients use to
// trust it, by CA file or by a pin of the CA's public key (a node's first
// contact needs no CA file: `node --ca-pin`). It knows nothing of gRPC.
package pki

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// ServerName is the name every server certificate carries and every
// client verifies, whatever address it dials (Nomad's
// server.<region>.nomad idea): a certificate the CA issued to something
// else never passes for the control plane.
const ServerName = "controlplane.cast.internal"

// NodeMetricsName is the one DNS name a node's certificate carries, for
// its metrics listener (`node --metrics-listen`): scrapers verify nodes
// with it and the cluster CA. Every node has the same name, never one a
// node chooses, and never ServerName: a node's certificate serves its
// metrics and can never pass for the control plane.
const NodeMetricsName = "node-metrics.cast.internal"

// PinPrefix starts a CA pin: "sha256:" and the hex SHA-256 of the CA's
// SubjectPublicKeyInfo.
const PinPrefix = "sha256:"

// CA signs server and client certificates: one NewCA made, or an
// operator's (OperatorCA), whose key may be of any type x509 signs with.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// NewCA makes a self-signed CA valid for ttl; keyDER is its private key
// (PKCS#8), which the caller seals before storing it.
func NewCA(ttl time.Duration) (certPEM, keyDER []byte, err error) {
	// The date tells two CAs of a rotation apart in `cast ca status`.
	return NewNamedCA("cast control plane CA "+time.Now().UTC().Format("2006-01-02T15:04:05Z"), ttl)
}

// NewNamedCA is NewCA with the common name cn (another PKI than the
// control plane's, such as etcd's).
func NewNamedCA(cn string, ttl time.Duration) (certPEM, keyDER []byte, err error) {
	key, tmpl, err := keyed(cn, ttl)
	if err != nil {
		return nil, nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if keyDER, err = x509.MarshalPKCS8PrivateKey(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyDER, nil
}

// KeyDER is ca's private key as PKCS#8 DER (to seal in the store).
func (ca *CA) KeyDER() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(ca.key) }

// LoadCA parses a CA made by NewCA (or sealed by KeyDER).
func LoadCA(certPEM, keyDER []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	// An operator's CA given to `cast ca rotate` may have any key type.
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("pki: the CA key cannot sign")
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("pki: the CA key does not match its certificate")
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: key}, nil
}

// ParseCert parses one PEM certificate.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("pki: not a PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// ServerCert issues a certificate for ServerName and extra hosts (names
// or IPs), valid for ttl, with the CA in its chain.
func (ca *CA) ServerCert(hosts []string, ttl time.Duration) (tls.Certificate, error) {
	der, key, err := ca.issue(ServerName, append([]string{ServerName}, hosts...), []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, ttl)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// Leaf issues a certificate for cn and hosts (names or IPs) with the
// extended usages given, valid for ttl, for a service other than cast's
// own (etcd's members and clients): PEM certificate and PKCS#8 key.
func (ca *CA) Leaf(cn string, hosts []string, usages []x509.ExtKeyUsage, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	der, key, err := ca.issue(cn, hosts, usages, ttl)
	if err != nil {
		return nil, nil, err
	}
	if keyPEM, err = KeyPEM(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// issue signs, with the CA, a certificate for a new key: for cn and hosts
// (names or IPs), with the extended usages given, valid for ttl within
// the CA's own life (ServerCert and Leaf).
func (ca *CA) issue(cn string, hosts []string, usages []x509.ExtKeyUsage, ttl time.Duration) ([]byte, *ecdsa.PrivateKey, error) {
	key, tmpl, err := keyed(cn, ttl)
	if err != nil {
		return nil, nil, err
	}
	ca.clamp(tmpl)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = usages
	addHosts(tmpl, hosts)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	return der, key, err
}

// keyed is a new key (NewKey) and a certificate template for cn, valid
// for ttl, to sign it under.
func keyed(cn string, ttl time.Duration) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(cn, ttl)
	return key, tmpl, err
}

// addHosts names hosts (names or IPs) in tmpl's SANs.
func addHosts(tmpl *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

// clamp ends tmpl no later than the CA (an operator's may expire before
// a certificate's lifetime is up), so a client renews before the CA's end
// rather than trusting a leaf whose chain is already dead.
func (ca *CA) clamp(tmpl *x509.Certificate) {
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
}

func template(cn string, ttl time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"cast"}},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(ttl)}, nil
}

// Pin is the CA pin of cert ("sha256:<hex>").
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return PinPrefix + hex.EncodeToString(sum[:])
}

// ValidPin says whether pin has a pin's form: PinPrefix and the 64 hex
// digits of a SHA-256.
func ValidPin(pin string) bool {
	h, ok := strings.CutPrefix(pin, PinPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// PoolConfig trusts the CA in caPEM.
func PoolConfig(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("pki: no certificate in the CA file")
	}
	return &tls.Config{RootCAs: pool, ServerName: ServerName, MinVersion: tls.VersionTLS12}, nil
}

// PinnedConfig trusts the CA whose public key has pin: the server's chain
// must hold that CA and the leaf must verify under it for ServerName.
func PinnedConfig(pin string) (*tls.Config, error) {
	if !ValidPin(pin) {
		return nil, fmt.Errorf("pki: a CA pin is %s and 64 hex digits (the control plane logs it)", PinPrefix)
	}
	// The roots are the pinned CA.
	return verifiedBy(func(chain []*x509.Certificate) error { return verifyPinned(chain, pin) }), nil
}

func verifyPinned(chain []*x509.Certificate, pin string) error {
	if len(chain) == 0 {
		return errors.New("pki: the server sent no certificate")
	}
	for _, c := range chain[1:] {
		if subtle.ConstantTimeCompare([]byte(Pin(c)), []byte(pin)) != 1 {
			continue
		}
		roots := x509.NewCertPool()
		roots.AddCert(c)
		_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: ServerName})
		return err
	}
	return errPinMismatch
}

// errPinMismatch says what to do when a pin taken before a CA rotation's
// activate step no longer matches the CA that signs the server.
var errPinMismatch = errors.New("pki: the server's CA does not match --ca-pin (or CAST_CA_PIN, or the context's ca-pin); if the control plane's CA was rotated, an admin's `cast ca` prints the new pin and `cast ca bundle` the CAs to trust")

// Issuer keeps a server certificate fresh: a handshake after two thirds of
// its lifetime, or after the signing CA changed (a CA rotation), gets a
// new one, so a long-running control plane never serves an expired
// certificate nor one from a CA it has moved away from.
type Issuer struct {
	ca    func() *CA // the signing CA now
	hosts []string
	ttl   time.Duration
	now   func() time.Time // tests move time

	mu      sync.Mutex
	cur     *tls.Certificate
	curCA   *CA
	renewAt time.Time
}

// NewIssuer issues the first certificate for hosts from ca().
func NewIssuer(ca func() *CA, hosts []string, ttl time.Duration) (*Issuer, error) {
	is := &Issuer{ca: ca, hosts: hosts, ttl: ttl, now: time.Now}
	if _, err := is.GetCertificate(nil); err != nil {
		return nil, err
	}
	return is, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (is *Issuer) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	ca := is.ca()
	if now := is.now(); is.cur == nil || !now.Before(is.renewAt) || ca != is.curCA {
		cert, err := ca.ServerCert(is.hosts, is.ttl)
		if err != nil {
			if is.cur != nil {
				return is.cur, nil // still valid; the next handshake retries
			}
			return nil, err
		}
		is.cur, is.curCA, is.renewAt = &cert, ca, now.Add(is.ttl*2/3)
	}
	return is.cur, nil
}

// ServeConfig is the TLS config of a daemon's HTTP listener (/metrics,
// /healthz, /readyz) serving get's certificate: no client certificate is
// asked for, since kubelet probes cannot send one.
func ServeConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{GetCertificate: get, MinVersion: tls.VersionTLS12}
}

// ServerConfig is the listener's TLS config. Clients may present a
// certificate; the control plane verifies it per call (VerifyClient), so a
// bad one is refused with a reason rather than a failed handshake.
func (is *Issuer) ServerConfig() *tls.Config {
	return &tls.Config{GetCertificate: is.GetCertificate, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
}

// FetchCA dials the TLS listener at addr, verifies its chain under the CA
// whose pin is pin (PinnedConfig), and returns that CA's certificate, PEM:
// the file scrapers and `cast` trust (`cast ca`).
func FetchCA(ctx context.Context, addr, pin string) ([]byte, error) {
	cfg, err := PinnedConfig(pin)
	if err != nil {
		return nil, err
	}
	return servedCA(ctx, addr, cfg, func(chain []*x509.Certificate) *x509.Certificate {
		for _, c := range chain[1:] {
			if Pin(c) == pin {
				return c
			}
		}
		return nil // verifyPinned let it through: cannot happen
	})
}

// FetchSigningCA dials the TLS listener at addr, verifies it against the
// CAs of bundlePEM (a client's CA file), and returns the CA that signs
// its certificate now, PEM: after `cast ca activate` a bundle holds the
// old and the new CA, and only the new one's pin lets a new node in.
func FetchSigningCA(ctx context.Context, addr string, bundlePEM []byte) ([]byte, error) {
	t, err := NewTrust("", bundlePEM)
	if err != nil {
		return nil, err
	}
	return servedCA(ctx, addr, t.Config(), func(chain []*x509.Certificate) *x509.Certificate {
		return IssuerOf(chain[0], chain[1:])
	})
}

// servedCA dials addr with cfg (which verifies the server) and returns,
// PEM, the CA pick chooses from the chain it served (leaf first).
func servedCA(ctx context.Context, addr string, cfg *tls.Config, pick func(chain []*x509.Certificate) *x509.Certificate) ([]byte, error) {
	cfg.NextProtos = []string{"h2"} // a gRPC listener wants ALPN
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := pick(conn.(*tls.Conn).ConnectionState().PeerCertificates)
	if c == nil {
		return nil, errors.New("pki: the server's chain lacks the CA that signs it")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), nil
}

// PeekChain dials addr over TLS without verifying anything and returns the
// chain it presents (leaf first): an error means the address does not
// speak TLS (or is not there). Only for explaining a failed dial: nothing
// it returns is trusted.
func PeekChain(ctx context.Context, addr string) ([]*x509.Certificate, error) {
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, ServerName: ServerName, MinVersion: tls.VersionTLS12} //nolint:gosec
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates, nil
}
