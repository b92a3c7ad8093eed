package kubeboot_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/kube/kubetest"
	"github.com/cast-dev/cast/internal/kubeboot"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// rbac is the install's Roles (deploy/k8s/base/rbac.yaml).
const rbac = "../../deploy/k8s/base/rbac.yaml"

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func etcdConfig() kubeboot.BootstrapConfig {
	c := kubeboot.DefaultBootstrapConfig()
	c.EtcdTLS = true
	return c
}

// Under the Role the install grants it, the bootstrap creates both
// Secrets with usable values; run again it only reads (nothing is
// regenerated, so a secrets key that sealed data never changes); and a
// Secret an operator made first is kept.
func TestBootstrapWithinRole(t *testing.T) {
	srv := kubetest.New(t, "cast", kubetest.RoleRules(t, rbac, "cast-bootstrap"))
	api := srv.Client(t)
	ctx, lg := ctxT(t), zaptest.NewLogger(t)
	if err := kubeboot.Bootstrap(ctx, api, etcdConfig(), lg); err != nil {
		t.Fatal(err)
	}
	cp, err := api.Get(ctx, kube.Secrets, kubeboot.ControlPlaneSecret)
	if err != nil {
		t.Fatal(err)
	}
	if tok := cp.Data[kubeboot.KeyAdminToken]; !strings.HasPrefix(tok, authz.TokenPrefix) || len(tok) < 32 {
		t.Errorf("admin token %q: want a cast token (CAST_BOOTSTRAP_TOKEN needs 32 characters)", tok)
	}
	if _, err := secrets.ParseKey([]byte(cp.Data[kubeboot.KeySecretsKey]), "secrets-key"); err != nil {
		t.Errorf("secrets key: %v", err)
	}
	etcd, err := api.Get(ctx, kube.Secrets, kubeboot.EtcdTLSSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range etcd.Data {
			yield(k)
		}
	}); !slices.Equal(got, []string{"ca.crt", "client.crt", "client.key", "server.crt", "server.key"}) {
		t.Errorf("cast-etcd-tls keys %v", got)
	}

	before := len(srv.Calls())
	if err := kubeboot.Bootstrap(ctx, api, etcdConfig(), lg); err != nil {
		t.Fatal(err)
	}
	if again := srv.Calls()[before:]; !slices.Equal(again, []string{"get secrets/cast-controlplane", "get secrets/cast-etcd-tls"}) {
		t.Errorf("a second run called %v; want reads alone", again)
	}
	if now, _ := api.Get(ctx, kube.Secrets, kubeboot.ControlPlaneSecret); now.Data[kubeboot.KeySecretsKey] != cp.Data[kubeboot.KeySecretsKey] {
		t.Error("a second run changed the secrets key")
	}

	own := kubetest.New(t, "cast", kubetest.RoleRules(t, rbac, "cast-bootstrap"))
	own.Put(t, kube.Secrets, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": kubeboot.ControlPlaneSecret},
		"data": map[string]any{kubeboot.KeyAdminToken: "b3BlcmF0b3Itb3du"}})
	if err := kubeboot.Bootstrap(ctx, own.Client(t), kubeboot.DefaultBootstrapConfig(), lg); err != nil {
		t.Fatal(err)
	}
	if calls := own.Calls(); !slices.Equal(calls, []string{"get secrets/cast-controlplane"}) {
		t.Errorf("with the operator's Secret and no --etcd-tls: %v", calls)
	}
}

// The etcd PKI works as the ha overlay uses it: a real etcd serves with
// the member certificate and requires client certificates, and a real
// control plane reaches it with the client certificate under the flags
// controlplane.yaml gives; the member certificate names every member as
// etcd.yaml's URLs do, and serves peers too.
func TestBootstrapEtcdTLS(t *testing.T) {
	srv := kubetest.New(t, "cast", nil)
	api := srv.Client(t)
	if err := kubeboot.Bootstrap(ctxT(t), api, etcdConfig(), zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	sec, err := api.Get(ctxT(t), kube.Secrets, kubeboot.EtcdTLSSecret)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(k string) string {
		p := filepath.Join(dir, k)
		if err := os.WriteFile(p, []byte(sec.Data[k]), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := file("ca.crt")
	serverCert, serverKey, clientCert, clientKey := file("server.crt"), file("server.key"), file("client.crt"), file("client.key")

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(sec.Data["ca.crt"]))
	leaf, err := pki.ParseCert([]byte(sec.Data["server.crt"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cast-etcd-0.cast-etcd", "cast-etcd-2.cast-etcd", "cast-etcd-1.cast-etcd.cast.svc", "cast-etcd-1.cast-etcd.cast.svc.cluster.local"} {
		for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
				t.Errorf("member certificate for %s, usage %v: %v", name, use, err)
			}
		}
	}
	if _, err := tls.LoadX509KeyPair(clientCert, clientKey); err != nil {
		t.Fatalf("client pair: %v", err)
	}

	url := testharness.StartTLSEtcdFiles(t, caFile, dir, serverCert, serverKey)
	cp := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{url}, ""
		c.Etcd = store.Access{CACert: caFile, Cert: clientCert, Key: clientKey}
	})
	c := testharness.DialServer(t, cp)
	if _, err := c.Auth.CreateJoinToken(ctxT(t), &castv1.CreateJoinTokenRequest{TtlSeconds: 60}); err != nil {
		t.Fatalf("a write over the bootstrapped etcd TLS: %v", err)
	}
	cfg := testharness.ControlPlaneConfig(t)
	cfg.EtcdEndpoints, cfg.DataDir, cfg.Etcd = []string{url}, "", store.Access{CACert: caFile}
	if s, err := controlplane.Start(ctxT(t), cfg, zaptest.NewLogger(t)); !errors.Is(err, store.ErrEtcdClientCert) {
		if s != nil {
			s.Stop()
		}
		t.Fatalf("a control plane without the client certificate: %v, want %v", err, store.ErrEtcdClientCert)
	}
}
