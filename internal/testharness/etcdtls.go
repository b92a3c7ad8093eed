package testharness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/store"
)

// CA signs throwaway certificates for one test (etcd over TLS).
type CA struct {
	File string // PEM of the CA certificate
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA and writes its certificate to dir/name.pem.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := certTemplate(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{File: filepath.Join(dir, name+".pem"), cert: cert, key: key}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue writes name.pem and name-key.pem (0600) for a server on
// 127.0.0.1 or a client, and returns their paths.
func (ca *CA) Issue(t testing.TB, dir, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	tmpl := certTemplate(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	issued, keyFile := ca.sign(t, dir, name, tmpl)
	return issued.File, keyFile
}

// Intermediate makes a CA under ca (an operator's issuing CA, as
// `controlplane --ca-cert --ca-key` takes it), writing name.pem and
// name-key.pem (0600).
func (ca *CA) Intermediate(t testing.TB, dir, name string) (inter *CA, keyFile string) {
	t.Helper()
	tmpl := certTemplate(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign
	return ca.sign(t, dir, name, tmpl)
}

// sign issues tmpl for a new key and writes name.pem and name-key.pem.
func (ca *CA) sign(t testing.TB, dir, name string, tmpl *x509.Certificate) (*CA, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	issued := &CA{File: filepath.Join(dir, name+".pem"), cert: cert, key: key}
	keyFile := filepath.Join(dir, name+"-key.pem")
	writePEM(t, issued.File, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return issued, keyFile
}

// Cert is the CA's certificate.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// StartTLSEtcd runs a real etcd on https://127.0.0.1 that requires a
// client certificate signed by ca, and returns its client URL. Each opt
// may change the member's config first (e.g. AuthTokenTTL).
func StartTLSEtcd(t testing.TB, ca *CA, dir string, opts ...func(*embed.Config)) string {
	t.Helper()
	certFile, keyFile := ca.Issue(t, dir, "etcd-server", true)
	return StartTLSEtcdFiles(t, ca.File, dir, certFile, keyFile, opts...)
}

// StartTLSEtcdFiles is StartTLSEtcd with a server certificate and key
// made elsewhere (the Kubernetes bootstrap's), trusting client
// certificates of the CA in caFile.
func StartTLSEtcdFiles(t testing.TB, caFile, dir, certFile, keyFile string, opts ...func(*embed.Config)) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cu := url.URL{Scheme: "https", Host: freeLoopbackAddr(t)}
	pu := url.URL{Scheme: "http", Host: freeLoopbackAddr(t)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = certFile, keyFile
	cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = caFile, true
	cfg.BcryptCost = 4 // bcrypt.MinCost: passwords are checked in milliseconds
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	for _, opt := range opts {
		opt(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start TLS etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("TLS etcd: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("TLS etcd not ready after 60s")
	}
	return cu.String()
}

// EnableEtcdAuth adds root and a user with readwrite on the store's default
// prefix only, then turns etcd's auth on. The admin connects with a
// client certificate whose CN is root (etcd's cert-CN identity).
func EnableEtcdAuth(t testing.TB, ep string, ca *CA, dir, user, password string) {
	t.Helper()
	cli := rootClient(t, ep, ca, dir)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := store.DefaultPrefix
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "cast"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "cast", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, user, password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, user, "cast"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
}

// rootClient dials ep as etcd's root user: a client certificate of ca
// whose CN is root (etcd's cert-CN identity once auth is on).
func rootClient(t testing.TB, ep string, ca *CA, dir string) *clientv3.Client {
	t.Helper()
	certFile, keyFile := ca.Issue(t, dir, "root", false)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// SecureEtcd is a TLS etcd requiring client certificates of CA, with a
// client certificate for "cast" and a second CA etcd does not trust.
type SecureEtcd struct {
	URL         string
	Dir         string
	CA, OtherCA *CA
	Cert, Key   string // signed by CA, CN cast
}

// StartSecureEtcd starts a SecureEtcd in a new temp dir until the test
// ends; opts as StartTLSEtcd's.
func StartSecureEtcd(t testing.TB, opts ...func(*embed.Config)) *SecureEtcd {
	t.Helper()
	e := &SecureEtcd{Dir: t.TempDir()}
	e.CA, e.OtherCA = NewCA(t, e.Dir, "ca"), NewCA(t, e.Dir, "other-ca")
	e.URL = StartTLSEtcd(t, e.CA, e.Dir, opts...)
	e.Cert, e.Key = e.CA.Issue(t, e.Dir, "cast", false)
	return e
}

// EnableAuth turns on etcd's auth with user (see EnableEtcdAuth).
func (e *SecureEtcd) EnableAuth(t testing.TB, user, password string) {
	t.Helper()
	EnableEtcdAuth(t, e.URL, e.CA, e.Dir, user, password)
}

// RootClient is a client of e as etcd's root user (after EnableAuth),
// closed at cleanup.
func (e *SecureEtcd) RootClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli := rootClient(t, e.URL, e.CA, e.Dir)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// StartTokenTTLEtcd starts a SecureEtcd with auth on whose simple auth
// tokens lapse after ttl seconds unused (etcd's --auth-token-ttl; it
// sweeps once a second), and returns the store access of its user.
func StartTokenTTLEtcd(t testing.TB, ttl uint) (*SecureEtcd, store.Access) {
	t.Helper()
	e := StartSecureEtcd(t, func(c *embed.Config) { c.AuthTokenTTL = ttl })
	e.EnableAuth(t, "cast-user", "right-password")
	return e, store.Access{CACert: e.CA.File, Cert: e.Cert, Key: e.Key, User: "cast-user", Password: "right-password"}
}
