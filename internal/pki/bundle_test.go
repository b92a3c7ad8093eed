package pki

import (
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

func mustCA(t *testing.T) *CA {
	t.Helper()
	c, k, err := NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func clientLeaf(t *testing.T, ca *CA) *x509.Certificate {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := CSR(key, "n1")
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ca.SignClient(csr, Identity{Role: "node", Name: "n1", Cred: "c1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ParseCert(chain)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// The bundle of a rotation: a certificate from either CA of the bundle
// passes, as client and as server, and names its issuer; one from a CA
// outside it (retired, or foreign) is refused as untrusted.
func TestBundleVerifies(t *testing.T) {
	old, next, foreign := mustCA(t), mustCA(t), mustCA(t)
	for _, tc := range []struct {
		name    string
		trusted []*CA
		signer  *CA
		wantErr error
	}{
		{"old only, old leaf", []*CA{old}, old, nil},
		{"rotation, old leaf", []*CA{old, next}, old, nil},
		{"rotation, new leaf", []*CA{next, old}, next, nil},
		{"old retired, old leaf", []*CA{next}, old, ErrUntrusted},
		{"not yet rotated, new leaf", []*CA{old}, next, ErrUntrusted},
		{"foreign leaf", []*CA{old, next}, foreign, ErrUntrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cas []*x509.Certificate
			for _, c := range tc.trusted {
				cas = append(cas, c.Cert)
			}
			id, err := VerifyClient([]*x509.Certificate{clientLeaf(t, tc.signer)}, cas, time.Now())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("client: got %v, want %v", err, tc.wantErr)
			}
			if err == nil && id.IssuerPin != Pin(tc.signer.Cert) {
				t.Errorf("issuer pin %s, want %s", id.IssuerPin, Pin(tc.signer.Cert))
			}
			srv, err := tc.signer.ServerCert(nil, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			trust, err := NewTrust("", BundlePEM(cas))
			if err != nil {
				t.Fatal(err)
			}
			chain := []*x509.Certificate{srv.Leaf, tc.signer.Cert}
			if err := trust.verify(chain); (err != nil) != (tc.wantErr != nil) {
				t.Errorf("server: got %v, want failure %v", err, tc.wantErr != nil)
			}
		})
	}
}

// A client trusts its pin until it holds a bundle, and then the bundle
// alone: a rotation moves it from the old CA to the new one.
func TestTrustFollowsBundle(t *testing.T) {
	old, next := mustCA(t), mustCA(t)
	serverOf := func(ca *CA) []*x509.Certificate {
		c, err := ca.ServerCert(nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return []*x509.Certificate{c.Leaf, ca.Cert}
	}
	trust, err := NewTrust(Pin(old.Cert), nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name         string
		bundle       []*x509.Certificate // nil: keep
		oldOK, newOK bool
	}{
		{"pin only", nil, true, false},
		{"rotate: both", []*x509.Certificate{old.Cert, next.Cert}, true, true},
		{"retire: new only", []*x509.Certificate{next.Cert}, false, true},
	}
	for _, st := range steps {
		if st.bundle != nil {
			if err := trust.SetBundle(BundlePEM(st.bundle)); err != nil {
				t.Fatal(err)
			}
			if trust.Hash() != BundleHash(st.bundle) {
				t.Errorf("%s: hash %s, want %s", st.name, trust.Hash(), BundleHash(st.bundle))
			}
		}
		if err := trust.verify(serverOf(old)); (err == nil) != st.oldOK {
			t.Errorf("%s: old CA's server: %v, want ok %v", st.name, err, st.oldOK)
		}
		if err := trust.verify(serverOf(next)); (err == nil) != st.newOK {
			t.Errorf("%s: new CA's server: %v, want ok %v", st.name, err, st.newOK)
		}
	}
}

func TestBundleHashAndParse(t *testing.T) {
	a, b := mustCA(t), mustCA(t)
	leaf := clientLeaf(t, a)
	for _, tc := range []struct {
		name    string
		x, y    []*x509.Certificate
		same    bool
		parseOK bool
	}{
		{"order does not matter", []*x509.Certificate{a.Cert, b.Cert}, []*x509.Certificate{b.Cert, a.Cert}, true, true},
		{"duplicates do not matter", []*x509.Certificate{a.Cert, a.Cert}, []*x509.Certificate{a.Cert}, true, true},
		{"another CA differs", []*x509.Certificate{a.Cert}, []*x509.Certificate{b.Cert}, false, true},
		{"a leaf is no CA", []*x509.Certificate{leaf}, []*x509.Certificate{a.Cert}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BundleHash(tc.x) == BundleHash(tc.y); got != tc.same {
				t.Errorf("same hash %v, want %v", got, tc.same)
			}
			if _, err := ParseBundle(BundlePEM(tc.x)); (err == nil) != tc.parseOK {
				t.Errorf("parse: %v, want ok %v", err, tc.parseOK)
			}
		})
	}
	if _, err := ParseBundle([]byte("not pem")); err == nil {
		t.Error("an empty bundle parsed")
	}
}

// The issuer moves its server certificate to a new signing CA at once.
func TestIssuerFollowsSigningCA(t *testing.T) {
	old, next := mustCA(t), mustCA(t)
	cur := old
	is, err := NewIssuer(func() *CA { return cur }, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*CA{old, next} {
		cur = want
		c, err := is.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Leaf.CheckSignatureFrom(want.Cert); err != nil {
			t.Errorf("server certificate not from the signing CA: %v", err)
		}
	}
}
