package pki

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
)

// A CA rotation keeps two CAs trusted at once: a trust bundle. Verifiers
// (the control plane for client certificates, nodes and the CLI for the
// server's) accept a certificate that chains to any CA of the bundle,
// while only one CA signs. A client learns a new bundle over a
// connection it already verified with the old one, so nothing it has
// not checked ever becomes trusted.

// ParseBundle parses every certificate of a PEM bundle; it must hold at
// least one, each a CA.
func ParseBundle(bundlePEM []byte) ([]*x509.Certificate, error) {
	out, err := parseCerts(bundlePEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA bundle: %w", err)
	}
	for _, c := range out {
		if !c.IsCA {
			return nil, fmt.Errorf("pki: CA bundle: %q is not a CA", c.Subject.CommonName)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("pki: no certificate in the CA bundle")
	}
	return out, nil
}

// BundlePEM encodes cas as one PEM bundle, in order.
func BundlePEM(cas []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range cas {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// BundleHash names a set of CAs whatever their order or encoding: the hex
// SHA-256 of their sorted, de-duplicated DER.
func BundleHash(cas []*x509.Certificate) string {
	ders := make([]string, 0, len(cas))
	seen := map[string]bool{}
	for _, c := range cas {
		if !seen[string(c.Raw)] {
			seen[string(c.Raw)] = true
			ders = append(ders, string(c.Raw))
		}
	}
	sort.Strings(ders)
	h := sha256.New()
	for _, d := range ders {
		sum := sha256.Sum256([]byte(d))
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BundleHashPEM is BundleHash of a PEM bundle ("" if it holds none).
func BundleHashPEM(bundlePEM []byte) string {
	cas, err := ParseBundle(bundlePEM)
	if err != nil {
		return ""
	}
	return BundleHash(cas)
}

// IssuerOf returns the CA of cas that signed leaf, nil for none.
func IssuerOf(leaf *x509.Certificate, cas []*x509.Certificate) *x509.Certificate {
	for _, ca := range cas {
		if bytes.Equal(leaf.RawIssuer, ca.RawSubject) && leaf.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}

// Trust is what a client trusts in the control plane: the CA of a pin
// until it holds a bundle, then the bundle's CAs (a bundle supersedes the
// pin, as a kubelet's kubeconfig supersedes kubeadm's discovery hash).
// SetBundle changes it for the next handshake, without a redial.
type Trust struct {
	pin   string
	roots atomic.Pointer[[]*x509.Certificate]
}

// NewTrust trusts pin's CA, or bundlePEM's CAs when it is not empty.
func NewTrust(pin string, bundlePEM []byte) (*Trust, error) {
	t := &Trust{pin: pin}
	if len(bundlePEM) > 0 {
		if err := t.SetBundle(bundlePEM); err != nil {
			return nil, err
		}
	} else if _, err := PinnedConfig(pin); err != nil {
		return nil, err
	}
	return t, nil
}

// SetBundle trusts bundlePEM's CAs from the next handshake on.
func (t *Trust) SetBundle(bundlePEM []byte) error {
	cas, err := ParseBundle(bundlePEM)
	if err != nil {
		return err
	}
	t.roots.Store(&cas)
	return nil
}

// Hash is BundleHash of the trusted bundle ("" while only a pin).
func (t *Trust) Hash() string {
	if r := t.roots.Load(); r != nil {
		return BundleHash(*r)
	}
	return ""
}

// Config is a client TLS config verifying the server with t.
func (t *Trust) Config() *tls.Config {
	return verifiedBy(t.verify) // against t as it is at the handshake
}

// verifiedBy is a client TLS config for ServerName whose only check of
// the server's chain (leaf first) is verify: Go's own verification is
// off because verify does it against roots of its own.
func verifiedBy(verify func(chain []*x509.Certificate) error) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         ServerName,
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verify(cs.PeerCertificates)
		},
	}
}

func (t *Trust) verify(chain []*x509.Certificate) error {
	r := t.roots.Load()
	if r == nil {
		return verifyPinned(chain, t.pin)
	}
	return VerifyServer(chain, *r)
}

// VerifyServer checks a server's chain (leaf first) against cas for
// ServerName.
func VerifyServer(chain, cas []*x509.Certificate) error {
	if len(chain) == 0 {
		return errors.New("pki: the server sent no certificate")
	}
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	for _, c := range chain[1:] {
		inters.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, DNSName: ServerName})
	if err != nil && errors.As(err, new(x509.UnknownAuthorityError)) {
		return fmt.Errorf("pki: the control plane's certificate (issuer %q) is not signed by a CA this client trusts; if its CA was rotated while this client was away, get the new CA bundle from an admin (`cast ca bundle`): %w",
			chain[0].Issuer.CommonName, err)
	}
	return err
}
