package kubeboot

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
)

// BootstrapConfig says what the bootstrap makes.
type BootstrapConfig struct {
	// EtcdTLS makes cast-etcd-tls for an etcd StatefulSet named
	// EtcdService (its headless Service too) of EtcdMembers members.
	EtcdTLS     bool
	EtcdService string
	EtcdMembers int
	// ClusterDomain completes the members' fully qualified names.
	ClusterDomain string
	// EtcdCATTL and EtcdCertTTL are the lifetimes of etcd's CA and of the
	// certificates it signs. Nothing renews them in the cluster: see
	// docs/install-kubernetes.md (or use cert-manager, which does).
	EtcdCATTL   time.Duration
	EtcdCertTTL time.Duration
}

// DefaultBootstrapConfig is the ha overlay's etcd: cast-etcd, 3 members.
func DefaultBootstrapConfig() BootstrapConfig {
	return BootstrapConfig{EtcdService: "cast-etcd", EtcdMembers: 3, ClusterDomain: "cluster.local",
		EtcdCATTL: 10 * 365 * 24 * time.Hour, EtcdCertTTL: 5 * 365 * 24 * time.Hour}
}

// Validate checks c.
func (c BootstrapConfig) Validate() error {
	if !c.EtcdTLS {
		return nil
	}
	if c.EtcdService == "" || c.EtcdMembers < 1 || c.ClusterDomain == "" {
		return fmt.Errorf("--etcd-tls needs --etcd-service, --etcd-members (at least 1) and --cluster-domain")
	}
	if c.EtcdCertTTL <= 0 || c.EtcdCATTL < c.EtcdCertTTL {
		return fmt.Errorf("etcd certificate lifetimes: want 0 < certificate (%s) <= CA (%s)", c.EtcdCertTTL, c.EtcdCATTL)
	}
	return nil
}

// Bootstrap creates the Secrets the control plane and etcd start from,
// those missing only: a Secret already there (an earlier run, or one an
// operator made) is left as it is, so a re-run never changes a key that
// sealed data.
func Bootstrap(ctx context.Context, api Objects, cfg BootstrapConfig, lg *zap.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := createIfMissing(ctx, api, ControlPlaneSecret, controlPlaneData, lg); err != nil {
		return err
	}
	if !cfg.EtcdTLS {
		return nil
	}
	return createIfMissing(ctx, api, EtcdTLSSecret, func() (map[string]string, error) {
		return etcdTLSData(cfg, api.Namespace())
	}, lg)
}

// createIfMissing creates Secret name with make's data unless it exists.
// Get comes first so a re-run generates nothing; a Create that loses a
// race to another writer is as good as found.
func createIfMissing(ctx context.Context, api Objects, name string, make func() (map[string]string, error), lg *zap.Logger) error {
	if _, err := api.Get(ctx, kube.Secrets, name); err == nil {
		lg.Info("secret exists, kept", zap.String("secret", name))
		return nil
	} else if !kube.Is(err, errs.KindNotFound) {
		return fmt.Errorf("read secret %s: %w", name, err)
	}
	data, err := make()
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	if _, err := api.Create(ctx, kube.Secrets, kube.Object{Name: name, Labels: managedBy, Data: data}); kube.Is(err, errs.KindAlreadyExists) {
		lg.Info("secret created meanwhile by another, kept", zap.String("secret", name))
		return nil
	} else if err != nil {
		return fmt.Errorf("create secret %s: %w", name, err)
	}
	lg.Info("secret created", zap.String("secret", name))
	return nil
}

// controlPlaneData is a fresh first admin token and secrets key.
func controlPlaneData() (map[string]string, error) {
	tok, err := authz.NewToken()
	if err != nil {
		return nil, err
	}
	key := make([]byte, secrets.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return map[string]string{KeyAdminToken: tok, KeySecretsKey: hex.EncodeToString(key)}, nil
}

// etcdTLSData is a new etcd CA, one certificate every member serves
// clients and peers with (and dials peers with: server and client usage),
// and the control plane's client certificate. The CA's key is dropped:
// nothing signs with it again (a new PKI is a new Secret).
func etcdTLSData(cfg BootstrapConfig, ns string) (map[string]string, error) {
	caPEM, caKey, err := pki.NewNamedCA("cast etcd CA "+time.Now().UTC().Format("2006-01-02T15:04:05Z"), cfg.EtcdCATTL)
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadCA(caPEM, caKey)
	if err != nil {
		return nil, err
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	srv, srvKey, err := ca.Leaf(cfg.EtcdService, EtcdHosts(cfg, ns), both, cfg.EtcdCertTTL)
	if err != nil {
		return nil, err
	}
	cli, cliKey, err := ca.Leaf("cast-controlplane", nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cfg.EtcdCertTTL)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ca.crt": string(caPEM), "server.crt": string(srv), "server.key": string(srvKey),
		"client.crt": string(cli), "client.key": string(cliKey)}, nil
}

// EtcdHosts are the names etcd's members are reached by: each member's
// under the headless Service, short and qualified, the Service's own, and
// loopback (etcdctl in a member's pod).
func EtcdHosts(cfg BootstrapConfig, ns string) []string {
	svc := cfg.EtcdService
	hosts := []string{svc, svc + "." + ns + ".svc", svc + "." + ns + ".svc." + cfg.ClusterDomain, "localhost", "127.0.0.1"}
	for i := range cfg.EtcdMembers {
		m := svc + "-" + strconv.Itoa(i) + "." + svc
		hosts = append(hosts, m, m+"."+ns+".svc", m+"."+ns+".svc."+cfg.ClusterDomain)
	}
	return hosts
}
