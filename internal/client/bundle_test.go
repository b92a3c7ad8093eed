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

// A context's `ca:` may be a file of the user's own PKI: the company's
// root that an operator CA chains to, or a system store that also holds
// cast's CA. The CLI rewrites only a file of cast's CAs (one it wrote, or
// one whose CAs are all in the control plane's bundle), and leaves any
// other as it is, without fetching the bundle again at every call.
func TestFileBundleSyncLeavesAFileOfOtherCAs(t *testing.T) {
	castCA, other, next := testCA(t), testCA(t), testCA(t)
	bundle := pki.BundlePEM([]*x509.Certificate{castCA.Cert, next.Cert})
	for _, tc := range []struct {
		name    string
		file    []byte
		rewrite bool
	}{
		{"the user's root only", other.CertPEM, false},
		{"a store that also holds cast's CA", pki.BundlePEM([]*x509.Certificate{other.Cert, castCA.Cert}), false},
		{"cast's CA only (cast ca > file)", castCA.CertPEM, true},
		{"garbled", []byte("garbage"), true},
	} {
		path := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(path, tc.file, 0o644); err != nil {
			t.Fatal(err)
		}
		sync := FileBundleSync(path, nil)
		if err := sync.Keep(bundle); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if rewritten := pki.BundleHashPEM(got) == pki.BundleHashPEM(bundle); rewritten != tc.rewrite {
			t.Errorf("%s: rewritten %v, want %v", tc.name, rewritten, tc.rewrite)
		}
		if !tc.rewrite && string(got) != string(tc.file) {
			t.Errorf("%s: the file changed", tc.name)
		}
		if sync.Have() != pki.BundleHashPEM(bundle) {
			t.Errorf("%s: Have is not the bundle kept or left: every call would fetch it again", tc.name)
		}
	}
	// Once cast wrote the file, a retire (the new bundle a subset of it)
	// rewrites it.
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, castCA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	sync := FileBundleSync(path, nil)
	for _, b := range [][]byte{bundle, next.CertPEM} {
		if err := sync.Keep(b); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); pki.BundleHashPEM(got) != pki.BundleHashPEM(b) {
			t.Errorf("a file cast wrote was not rewritten")
		}
	}
}
