package pki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// An operator's CA (`controlplane --ca-cert --ca-key`), typically an
// intermediate of the company's PKI, signs in place of a generated one.
// It is checked before anything is served: a certificate that cannot
// sign, a key that is not its own or a CA out of its validity would only
// fail later, at every client's handshake.

// Typed refusals of an operator CA, so callers and tests tell them apart.
var (
	ErrNotCA       = errors.New("the certificate is not a CA (it needs basic constraints CA:TRUE and, if it has a key usage, keyCertSign)")
	ErrKeyMismatch = errors.New("the key does not match the CA certificate")
	ErrCAExpired   = errors.New("the CA certificate has expired or is not valid yet")
)

// MaxCAKeyFile bounds the read of an operator CA's key file (--ca-key,
// `cast ca rotate --key`).
const MaxCAKeyFile = 64 << 10

// OperatorCA parses an operator's CA certificate (one PEM certificate)
// and its private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC) and checks
// that the pair can sign certificates at now.
func OperatorCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	cert, err := onlyCert(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA || !cert.BasicConstraintsValid || (cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0) {
		return nil, fmt.Errorf("%w: subject %q", ErrNotCA, cert.Subject.CommonName)
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, fmt.Errorf("%w: subject %q, valid %s to %s", ErrCAExpired, cert.Subject.CommonName,
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := parseSigner(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w (subject %q)", ErrKeyMismatch, cert.Subject.CommonName)
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), key: key}, nil
}

// onlyCert parses a PEM file that must hold exactly one certificate: the
// CA's own, not a bundle with its issuers (which clients would then trust
// for everything those issuers sign).
func onlyCert(certPEM []byte) (*x509.Certificate, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("pki: the CA certificate file holds %d certificates; give exactly one, the CA whose key is the key file", len(certs))
	}
	return certs[0], nil
}

// parseCerts parses every CERTIFICATE block of a PEM file.
func parseCerts(certPEM []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return certs, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
}

// parseSigner parses a PEM private key that can sign.
func parseSigner(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, errors.New("pki: no PEM private key in the CA key file")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			continue // e.g. EC PARAMETERS before the key
		}
		if err != nil {
			return nil, fmt.Errorf("pki: CA key: %w", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("pki: CA key of type %T cannot sign", k)
		}
		return s, nil
	}
}
