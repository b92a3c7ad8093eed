package client

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/pki"
)

func testCA(t *testing.T) *pki.CA {
	t.Helper()
	c, k, err := pki.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// A CA file is read again at each handshake, and a context's file is
// what FileBundleSync keeps: through a rotation's steps a long-lived
// client trusts what the file holds now, and a file that no longer
// parses keeps the last good bundle.
func TestFileTrustFollowsTheFile(t *testing.T) {
	oldCA, newCA := testCA(t), testCA(t)
	served := func(ca *pki.CA) tls.ConnectionState {
		c, err := ca.ServerCert(nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.Leaf, ca.Cert}}
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, oldCA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := fileTrust(path)
	if err != nil {
		t.Fatal(err)
	}
	sync := FileBundleSync(path, nil)
	for _, st := range []struct {
		name         string
		file         []byte // kept with sync.Keep (nil: written raw below)
		raw          []byte
		oldOK, newOK bool
	}{
		{"before the rotation", nil, nil, true, false},
		{"rotate: both", pki.BundlePEM([]*x509.Certificate{oldCA.Cert, newCA.Cert}), nil, true, true},
		{"a garbled rewrite keeps the last", nil, []byte("garbage"), true, true},
		{"retire: the new one only", pki.BundlePEM([]*x509.Certificate{newCA.Cert}), nil, false, true},
	} {
		if st.file != nil {
			if err := sync.Keep(st.file); err != nil {
				t.Fatal(err)
			}
			if sync.Have() != pki.BundleHashPEM(st.file) {
				t.Errorf("%s: the file's hash is not the kept bundle's", st.name)
			}
		}
		if st.raw != nil {
			if err := os.WriteFile(path, st.raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := cfg.VerifyConnection(served(oldCA)); (err == nil) != st.oldOK {
			t.Errorf("%s: the old CA's server: %v, want ok %v", st.name, err, st.oldOK)
		}
		if err := cfg.VerifyConnection(served(newCA)); (err == nil) != st.newOK {
			t.Errorf("%s: the new CA's server: %v, want ok %v", st.name, err, st.newOK)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the CA file's mode changed: %v %v", fi, err)
	}
	if err := sync.Keep([]byte("not a bundle")); err == nil {
		t.Error("a bundle without certificates was kept")
	}
}
