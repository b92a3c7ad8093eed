package catrust

import (
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/cast-dev/cast/internal/pki"
)

// KeyAAD binds a sealed CA key to its purpose.
var KeyAAD = []byte("cast/tls-ca-key")

// Set is what a replica trusts and signs with, built from one revision of
// the store's Record.
type Set struct {
	Signer  *pki.CA
	Trusted []*x509.Certificate // the signer first
	Bundle  []byte              // Trusted, PEM
	Hash    string              // pki.BundleHash(Trusted)
	Retired []*x509.Certificate // no longer trusted (refusals name them)
	Rec     Record
}

// newSet is the set of rec signing with signer.
func newSet(signer *pki.CA, rec Record) (*Set, error) {
	set := &Set{Signer: signer, Trusted: []*x509.Certificate{signer.Cert}, Rec: rec}
	for _, o := range rec.Others {
		c, err := pki.ParseCert(o.CertPEM)
		if err != nil {
			return nil, fmt.Errorf("the %s CA of the rotation: %w", o.State, err)
		}
		set.Trusted = append(set.Trusted, c)
	}
	set.Retired = retiredCerts(rec)
	set.seal()
	return set, nil
}

// seal fills in the bundle and its hash from Trusted.
func (set *Set) seal() {
	set.Bundle, set.Hash = pki.BundlePEM(set.Trusted), pki.BundleHash(set.Trusted)
}

func retiredCerts(rec Record) []*x509.Certificate {
	var out []*x509.Certificate
	for _, r := range rec.Retired {
		if c, err := pki.ParseCert(r.CertPEM); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// Signs reports whether the set's signer is one it trusts (not so on a
// replica that could not move away from a signer the store retired).
func (set *Set) Signs() bool {
	return slices.ContainsFunc(set.Trusted, func(c *x509.Certificate) bool { return c.Equal(set.Signer.Cert) })
}

// Pins are the pins of the trusted CAs, the bundle's.
func (set *Set) Pins() []string {
	out := make([]string, 0, len(set.Trusted))
	for _, c := range set.Trusted {
		out = append(out, pki.Pin(c))
	}
	return out
}

// RetiredIssuer names the retired CA that signed leaf, "" for none.
func (set *Set) RetiredIssuer(leaf *x509.Certificate) string {
	ca := pki.IssuerOf(leaf, set.Retired)
	if ca == nil {
		return ""
	}
	for _, r := range set.Rec.Retired {
		if r.Pin == pki.Pin(ca) {
			return fmt.Sprintf("%s, retired %s", r.Pin, r.At.UTC().Format(time.RFC3339))
		}
	}
	return pki.Pin(ca)
}

// StoredPin is the pin of a stored CA ("" if its certificate is unreadable).
func StoredPin(rec Record) string {
	c, err := pki.ParseCert(rec.CertPEM)
	if err != nil {
		return ""
	}
	return pki.Pin(c)
}

// othersPEM are the certificates of rec's other CAs.
func othersPEM(rec Record) [][]byte {
	out := make([][]byte, 0, len(rec.Others))
	for _, o := range rec.Others {
		out = append(out, o.CertPEM)
	}
	return out
}
