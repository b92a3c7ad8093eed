package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Client certificates (mTLS): a node (or a user) makes its own key and
// sends only a CSR; the CA signs a short-lived certificate whose subject
// the control plane chooses, never the CSR: CommonName is the principal's
// name, OrganizationalUnit its role and SerialNumber the hash of the
// credential record it stands for. The control plane checks that record
// on every call, so revoking it refuses the certificate at once, long
// before it expires.

// Identity is who a client certificate names.
type Identity struct {
	Role string
	Name string
	// Cred is the hash of the credential record the certificate is bound
	// to (a store key; it is no secret and no bearer token).
	Cred string
	// NodeMetrics makes the certificate serve a node's metrics listener
	// too: server auth for NodeMetricsName alone (SignClient only).
	NodeMetrics bool
	// IssuerPin is the pin of the CA that signed the certificate (set by
	// VerifyClient: during a CA rotation two are trusted).
	IssuerPin string
}

// ClientSkew is how far before its issue a client certificate is valid,
// for clocks a little behind; lifetimes are counted from the issue.
const ClientSkew = time.Minute

// Typed verification failures, so the caller can give each its reason.
var (
	ErrExpired   = errors.New("the client certificate has expired or is not valid yet")
	ErrUntrusted = errors.New("the client certificate was not issued by this control plane's CA")
	ErrNotClient = errors.New("the certificate is not a cast client certificate")
)

// NewKey makes a client's private key.
func NewKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// KeyPEM encodes key as a PKCS#8 "PRIVATE KEY" block.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// CSR is a PEM certificate request for key; name is only a hint (the CA
// decides the subject).
func CSR(key *ecdsa.PrivateKey, name string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// SignClient checks csrPEM's self-signature (the requester holds the key)
// and issues a client certificate for id valid for ttl. It returns the
// leaf and the CA, PEM, in that order.
func (ca *CA) SignClient(csrPEM []byte, id Identity, ttl time.Duration) ([]byte, error) {
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	if id.Role == "" || id.Name == "" || id.Cred == "" {
		return nil, errors.New("pki: a client identity needs a role, a name and a credential")
	}
	tmpl, err := template(id.Name, ttl)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-ClientSkew), now.Add(ttl)
	ca.clamp(tmpl)
	tmpl.Subject.OrganizationalUnit = []string{id.Role}
	tmpl.Subject.SerialNumber = id.Cred
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if id.NodeMetrics {
		// The fixed name only: whatever the node asks in its CSR (ignored),
		// its certificate names no address and not the control plane.
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{NodeMetricsName}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM...), nil
}

// ParseCSR parses a PEM certificate request and checks its signature
// (the requester holds the key).
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("pki: not a PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("pki: certificate request signature: %w", err)
	}
	return csr, nil
}

// VerifyClient checks a client's chain (leaf first) against the trusted
// CAs at now and returns who it names and which CA signed it.
func VerifyClient(chain []*x509.Certificate, cas []*x509.Certificate, now time.Time) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, ErrNotClient
	}
	leaf := chain[0]
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	var inv x509.CertificateInvalidError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		return Identity{}, fmt.Errorf("%w (valid until %s)", ErrExpired, leaf.NotAfter.UTC().Format(time.RFC3339))
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return Identity{}, ErrUntrusted
	case err != nil:
		return Identity{}, fmt.Errorf("%w: %v", ErrNotClient, err)
	}
	id := Identity{Name: leaf.Subject.CommonName, Cred: leaf.Subject.SerialNumber}
	if ca := IssuerOf(leaf, cas); ca != nil {
		id.IssuerPin = Pin(ca)
	}
	if len(leaf.Subject.OrganizationalUnit) == 1 {
		id.Role = leaf.Subject.OrganizationalUnit[0]
	}
	if id.Role == "" || id.Name == "" || id.Cred == "" {
		return Identity{}, ErrNotClient
	}
	return id, nil
}

// ServesNodeMetrics reports whether cert can serve a node's metrics
// (issued by an older control plane, it cannot).
func ServesNodeMetrics(cert *x509.Certificate) bool {
	return cert.VerifyHostname(NodeMetricsName) == nil && slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
}

// RenewAt is when a client should renew cert: at two thirds of its
// lifetime, counted from its issue.
func RenewAt(cert *x509.Certificate) time.Time {
	issued := cert.NotBefore.Add(ClientSkew)
	return issued.Add(cert.NotAfter.Sub(issued) * 2 / 3)
}

// ParseKeyPair parses a bundle holding a certificate chain and its key
// (one file, so the two are always replaced together).
func ParseKeyPair(bundle []byte) (tls.Certificate, error) {
	c, err := tls.X509KeyPair(bundle, bundle)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: certificate and key: %w", err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
	}
	return c, nil
}
