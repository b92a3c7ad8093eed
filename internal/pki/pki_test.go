package pki

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func newCA(t *testing.T) *CA {
	certPEM, keyDER, err := NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(certPEM, keyDER)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// handshake runs a real TLS handshake over a pipe.
func handshake(t *testing.T, srv, cli *tls.Config) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() { done <- tls.Server(a, srv).Handshake() }()
	err := tls.Client(b, cli).Handshake()
	if err != nil {
		b.Close()
	}
	<-done
	return err
}

func TestTrust(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	is, err := NewIssuer(func() *CA { return ca }, []string{"127.0.0.1", "cp.example"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := is.ServerConfig()
	pinned, _ := PinnedConfig(Pin(ca.Cert))
	wrongPin, _ := PinnedConfig(Pin(other.Cert))
	pool, _ := PoolConfig(ca.CertPEM)
	otherPool, _ := PoolConfig(other.CertPEM)
	expired, err := ca.ServerCert(nil, -time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expiredCfg := &tls.Config{Certificates: []tls.Certificate{expired}}
	for _, tc := range []struct {
		name string
		srv  *tls.Config
		cli  *tls.Config
		ok   bool
	}{
		{"pinned", srv, pinned, true},
		{"CA file", srv, pool, true},
		{"wrong pin", srv, wrongPin, false},
		{"other CA", srv, otherPool, false},
		{"expired cert, pinned", expiredCfg, pinned, false},
	} {
		if err := handshake(t, tc.srv, tc.cli); (err == nil) != tc.ok {
			t.Errorf("%s: handshake err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	// A pin taken before a CA rotation's activate step says what to do.
	if err := handshake(t, srv, wrongPin); err == nil || !strings.Contains(err.Error(), "cast ca bundle") {
		t.Errorf("wrong pin: %v, want a message naming cast ca bundle", err)
	}
	if _, err := PinnedConfig("abc"); err == nil {
		t.Error("a malformed pin was accepted")
	}
	if !strings.HasPrefix(Pin(ca.Cert), PinPrefix) {
		t.Error(Pin(ca.Cert))
	}
	if _, err := LoadCA(ca.CertPEM, mustKey(t, other)); err == nil {
		t.Error("a CA loaded with another CA's key")
	}
}

func mustKey(t *testing.T, _ *CA) []byte {
	_, keyDER, err := NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return keyDER
}

// The issuer renews its certificate at two thirds of its lifetime, so a
// handshake never meets an expired one.
func TestIssuerRenews(t *testing.T) {
	ca := newCA(t)
	is, err := NewIssuer(func() *CA { return ca }, nil, 90*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	at := start
	is.now = func() time.Time { return at }
	first, _ := is.GetCertificate(nil)
	at = start.Add(59 * time.Minute)
	if c, _ := is.GetCertificate(nil); c != first {
		t.Error("renewed before two thirds of the lifetime")
	}
	at = start.Add(61 * time.Minute)
	second, _ := is.GetCertificate(nil)
	if second == first || second.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Error("not renewed after two thirds of the lifetime")
	}
	pinned, _ := PinnedConfig(Pin(ca.Cert))
	if err := handshake(t, is.ServerConfig(), pinned); err != nil {
		t.Errorf("handshake with the renewed certificate: %v", err)
	}
}

// Client certificates: the CA signs a CSR for the identity it chooses
// (never the CSR's subject), and VerifyClient tells an expired, a foreign
// and a good certificate apart.
func TestClientCerts(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	id := Identity{Role: "node", Name: "n1", Cred: "abc123"}
	issue := func(ca *CA) []byte { return signed(t, ca, id).Certificate[0] } // its CSR asks for other names
	for _, tc := range []struct {
		name string
		der  []byte
		at   time.Time
		want error
	}{
		{"good", issue(ca), time.Now(), nil},
		{"expired", issue(ca), time.Now().Add(2 * time.Hour), ErrExpired},
		{"other CA", issue(other), time.Now(), ErrUntrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := x509.ParseCertificate(tc.der)
			if err != nil {
				t.Fatal(err)
			}
			got, err := VerifyClient([]*x509.Certificate{leaf}, []*x509.Certificate{ca.Cert}, tc.at)
			want := id
			want.IssuerPin = Pin(ca.Cert)
			if !errors.Is(err, tc.want) || (tc.want == nil && got != want) {
				t.Errorf("got %+v, %v; want %+v, %v", got, err, id, tc.want)
			}
		})
	}
	if _, err := ca.SignClient([]byte("not a csr"), id, time.Hour); err == nil {
		t.Error("signed garbage")
	}
}

// A certificate never outlives the CA that signs it (an operator's CA
// may end before a certificate's lifetime is up).
func TestCertsEndWithTheCA(t *testing.T) {
	ca := newCA(t) // valid for an hour
	srv, err := ca.ServerCert(nil, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := CSR(key, "n1")
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ca.SignClient(csr, Identity{Role: "node", Name: "n1", Cred: "c"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ParseCert(chain)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*x509.Certificate{"server": srv.Leaf, "client": cli} {
		if c.NotAfter.After(ca.Cert.NotAfter) {
			t.Errorf("%s certificate ends %s, after its CA (%s)", name, c.NotAfter, ca.Cert.NotAfter)
		}
	}
}

// signed issues a client certificate for id from ca, for a CSR that asks
// for the control plane's name and a loopback IP (which the CA ignores).
func signed(t *testing.T, ca *CA, id Identity) tls.Certificate {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: ServerName},
		DNSNames: []string{ServerName, NodeMetricsName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}, key)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ca.SignClient(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := KeyPEM(key)
	c, err := ParseKeyPair(append(chain, keyPEM...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A node's certificate serves its metrics to a scraper that trusts the CA
// and verifies NodeMetricsName, and nothing else: never the control plane
// to the cast CLI (CA file) or to a node (pin), even for a node named like
// the control plane that asked for its names. A user's certificate serves
// nothing, and the control plane's certificate does not pass for a node.
func TestNodeMetricsCert(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	nodeID := Identity{Role: "node", Name: ServerName, Cred: "abc123", NodeMetrics: true}
	node := signed(t, ca, nodeID)
	user := signed(t, ca, Identity{Role: "user", Name: "alice", Cred: "def456"})
	foreign := signed(t, other, nodeID)
	is, err := NewIssuer(func() *CA { return ca }, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Leaf.DNSNames; len(got) != 1 || got[0] != NodeMetricsName || len(node.Leaf.IPAddresses) != 0 {
		t.Fatalf("node certificate names %v %v, want only %s", got, node.Leaf.IPAddresses, NodeMetricsName)
	}
	if !ServesNodeMetrics(node.Leaf) || ServesNodeMetrics(user.Leaf) {
		t.Fatal("ServesNodeMetrics is wrong")
	}
	serving := func(c tls.Certificate) *tls.Config {
		return ServeConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &c, nil })
	}
	cli, _ := PoolConfig(ca.CertPEM)
	pinned, _ := PinnedConfig(Pin(ca.Cert))
	scraper, _ := PoolConfig(ca.CertPEM)
	scraper.ServerName = NodeMetricsName
	for _, tc := range []struct {
		name     string
		srv, cli *tls.Config
		ok       bool
	}{
		{"scraper, node", serving(node), scraper, true},
		{"scraper, node of another CA", serving(foreign), scraper, false},
		{"scraper, user", serving(user), scraper, false},
		{"scraper, control plane", is.ServerConfig(), scraper, false},
		{"cast CLI, node as control plane", serving(node), cli, false},
		{"node, node as control plane", serving(node), pinned, false},
		{"cast CLI, control plane", is.ServerConfig(), cli, true},
	} {
		if err := handshake(t, tc.srv, tc.cli); (err == nil) != tc.ok {
			t.Errorf("%s: handshake err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	// The control plane's check of the same certificate as a client's is
	// unchanged.
	if got, err := VerifyClient([]*x509.Certificate{node.Leaf}, []*x509.Certificate{ca.Cert}, time.Now()); err != nil || got.Name != ServerName || got.Role != "node" {
		t.Errorf("VerifyClient of a node certificate: %+v %v", got, err)
	}
}

// ServerCert names ServerName and the extra hosts (names as DNS names,
// IPs as IPs) for server auth; Leaf names only what it is given, with
// the usages given.
func TestIssuedNames(t *testing.T) {
	ca := newCA(t)
	srv, err := ca.ServerCert([]string{"127.0.0.1", "cp.example", ""}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Leaf
	if strings.Join(c.DNSNames, ",") != ServerName+",cp.example" || len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) ||
		len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || c.Subject.CommonName != ServerName {
		t.Errorf("server cert: cn %q dns %v ips %v usages %v", c.Subject.CommonName, c.DNSNames, c.IPAddresses, c.ExtKeyUsage)
	}
	certPEM, keyPEM, err := ca.Leaf("m0", []string{"etcd.local"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.Subject.CommonName != "m0" || strings.Join(l.DNSNames, ",") != "etcd.local" || len(l.ExtKeyUsage) != 1 || l.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("leaf: cn %q dns %v usages %v", l.Subject.CommonName, l.DNSNames, l.ExtKeyUsage)
	}
}
