package controlplane_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// testCA is a certificate and its key, as an operator's PKI would hold.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// makeCA issues a certificate for cn, signed by parent (self-signed when
// nil); edit changes the template first.
func makeCA(t *testing.T, cn string, parent *testCA, key crypto.Signer, edit func(*x509.Certificate)) *testCA {
	t.Helper()
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(t, err)
		key = k
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"Example Corp"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	if edit != nil {
		edit(tmpl)
	}
	signer, issuer := key, tmpl
	if parent != nil {
		signer, issuer = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	return &testCA{cert: cert, key: key}
}

func (c *testCA) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})
}

// write writes the certificate and key files (the key 0600, as PKCS#1
// for RSA and PKCS#8 otherwise) and returns their paths.
func (c *testCA) write(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	block := &pem.Block{Type: "PRIVATE KEY"}
	if k, ok := c.key.(*rsa.PrivateKey); ok {
		block = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	} else {
		der, err := x509.MarshalPKCS8PrivateKey(c.key)
		must(t, err)
		block.Bytes = der
	}
	must(t, os.WriteFile(certFile, c.certPEM(), 0o644))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600))
	return certFile, keyFile
}

// An operator CA is checked before anything is served: each bad pair is
// refused with its own error, and a good one (an intermediate, RSA or
// EC) is accepted.
func TestOperatorCARefusals(t *testing.T) {
	t.Parallel()
	root := makeCA(t, "Example Root", nil, nil, nil)
	good := makeCA(t, "Example Issuing CA", root, nil, nil)
	other := makeCA(t, "Other", root, nil, nil)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	for _, tc := range []struct {
		name string
		// files returns the --ca-cert and --ca-key files.
		files func(t *testing.T) (string, string)
		want  error  // errors.Is, when typed
		text  string // in the message
	}{
		{name: "intermediate, EC", files: good.write},
		{name: "intermediate, RSA PKCS#1", files: makeCA(t, "RSA CA", root, rsaKey, nil).write},
		{name: "not a CA", want: pki.ErrNotCA, files: makeCA(t, "leaf", root, nil, func(c *x509.Certificate) {
			c.IsCA, c.KeyUsage = false, x509.KeyUsageDigitalSignature
		}).write},
		{name: "CA without keyCertSign", want: pki.ErrNotCA, files: makeCA(t, "crl only", root, nil, func(c *x509.Certificate) {
			c.KeyUsage = x509.KeyUsageCRLSign
		}).write},
		{name: "expired", want: pki.ErrCAExpired, files: makeCA(t, "old", root, nil, func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
		}).write},
		{name: "not valid yet", want: pki.ErrCAExpired, files: makeCA(t, "future", root, nil, func(c *x509.Certificate) {
			c.NotBefore = time.Now().Add(time.Hour)
		}).write},
		{name: "key of another CA", want: pki.ErrKeyMismatch, files: func(t *testing.T) (string, string) {
			certFile, _ := good.write(t)
			_, keyFile := other.write(t)
			return certFile, keyFile
		}},
		{name: "key readable by others", text: "chmod 600", files: func(t *testing.T) (string, string) {
			certFile, keyFile := good.write(t)
			must(t, os.Chmod(keyFile, 0o640))
			return certFile, keyFile
		}},
		{name: "bundle with the root", text: "holds 2 certificates", files: func(t *testing.T) (string, string) {
			certFile, keyFile := good.write(t)
			must(t, os.WriteFile(certFile, append(good.certPEM(), root.certPEM()...), 0o644))
			return certFile, keyFile
		}},
		{name: "no key in the key file", text: "no PEM private key", files: func(t *testing.T) (string, string) {
			certFile, keyFile := good.write(t)
			must(t, os.WriteFile(keyFile, good.certPEM(), 0o600))
			return certFile, keyFile
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certFile, keyFile := tc.files(t)
			ca, err := controlplane.ReadOperatorCA(certFile, keyFile, time.Now())
			if tc.want == nil && tc.text == "" {
				if err != nil {
					t.Fatalf("refused a good CA: %v", err)
				}
				if pki.Pin(ca.Cert) == "" || !strings.Contains(string(ca.CertPEM), "CERTIFICATE") {
					t.Fatalf("CA loaded without its certificate")
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("got %q, want it to say %q", err, tc.text)
			}
		})
	}
}

// A control plane given an operator's CA (an intermediate under the
// company root) serves and signs from it: switching a store off its
// generated CA needs --ca-replace, every replica given the same files
// serves the same CA, a replica without them is refused, and a node joins
// with the operator CA's pin and gets a certificate that chains to the
// company root.
func TestOperatorCA(t *testing.T) {
	t.Parallel()
	root := makeCA(t, "Example Root", nil, nil, nil)
	inter := makeCA(t, "Example cast CA", root, nil, func(c *x509.Certificate) { c.MaxPathLenZero = true })
	certFile, keyFile := inter.write(t)
	wantPin := pki.Pin(inter.cert)
	ep := testharness.StartEtcd(t, nil)
	secretsKey := filepath.Join(t.TempDir(), controlplane.SecretsKeyFileName)
	replica := func(dataDir string, opCA, replace bool) func(*controlplane.Config) {
		return func(c *controlplane.Config) {
			// Every replica of a store has its secrets key, the operator CA's too.
			c.EtcdEndpoints, c.DataDir, c.TLS.Enabled, c.TLS.CAReplace, c.SecretsKeyFile = []string{ep}, dataDir, true, replace, secretsKey
			if opCA {
				c.TLS.CACertFile, c.TLS.CAKeyFile = certFile, keyFile
			}
		}
	}
	refused := func(cb func(*controlplane.Config), says ...string) {
		t.Helper()
		cfg := testharness.ControlPlaneConfig(t)
		cb(&cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := controlplane.Start(ctx, cfg, zaptest.NewLogger(t))
		if err == nil {
			s.Stop()
			t.Fatalf("started; want a refusal saying %q", says)
		}
		for _, w := range says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal %q does not say %q", err, w)
			}
		}
	}

	dirA, dirB := t.TempDir(), t.TempDir()
	gen := testharness.StartControlPlane(t, replica(dirA, false, false))
	genPin := gen.CAPin()
	gen.Stop()
	refused(replica(dirA, true, false), "--ca-replace", "join again", genPin, wantPin)

	a := testharness.StartControlPlane(t, replica(dirA, true, true))
	b := testharness.StartControlPlane(t, replica(dirB, true, false))
	for _, s := range []*controlplane.Server{a, b} {
		if s.CAPin() != wantPin {
			t.Fatalf("pin %s, want the operator CA's %s", s.CAPin(), wantPin)
		}
		written, err := os.ReadFile(s.CAFile())
		must(t, err)
		if c, err := pki.ParseCert(written); err != nil || !c.Equal(inter.cert) {
			t.Fatalf("%s is not the operator CA: %v", s.CAFile(), err)
		}
		// The server's chain verifies under the company root alone.
		roots := x509.NewCertPool()
		roots.AddCert(root.cert)
		conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: roots, ServerName: pki.ServerName, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("TLS to %s trusting only the company root: %v", s.Addr(), err)
		}
		conn.Close()
	}
	refused(replica(t.TempDir(), false, false), "operator", wantPin, "--ca-cert")

	ctx := ctxT(t)
	admin, err := client.Context{Addr: a.Addr(), CAPin: wantPin, Token: testharness.AdminToken()}.Dial()
	must(t, err)
	defer admin.Close()
	join, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	must(t, err)
	nodeDir := filepath.Join(t.TempDir(), "n1")
	testharness.StartNode(t, a.Addr(), "n1", func(c *node.Config) { c.CAPin, c.JoinToken, c.DataDir = wantPin, join.Token, nodeDir })
	waitConnected(t, admin, "n1", true)

	leaf := leafOf(t, node.IdentityPath(nodeDir))
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root.cert)
	inters.AddCert(inter.cert)
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatalf("the node's certificate does not chain to the company root: %v", err)
	}
	if len(chains[0]) != 3 || !chains[0][1].Equal(inter.cert) || leaf.Subject.CommonName != "n1" {
		t.Errorf("chain %d long, leaf %q: want n1 <- operator CA <- root", len(chains[0]), leaf.Subject.CommonName)
	}
	// Replica B, given the same files, takes the certificate A issued.
	asNode := dialCert(t, b, node.IdentityPath(nodeDir))
	if _, err := asNode.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil {
		t.Errorf("replica B refused the certificate replica A issued: %v", err)
	}
}
