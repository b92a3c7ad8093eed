package e2e

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/testharness"
)

// controlplane --ca-cert --ca-key through the real binaries: the control
// plane serves and signs from an operator's issuing CA (an intermediate
// under a company root), logs its pin and writes it to ca.pem, and a node
// process joins with that pin and gets a certificate chained to the root.
// A node holding a certificate from before node metrics served TLS renews
// it at start and then serves its metrics over HTTPS.
func TestOperatorCAThroughRealProcesses(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	pkiDir, dataDir, addr := t.TempDir(), t.TempDir(), freeAddr(t)
	root := testharness.NewCA(t, pkiDir, "company-root")
	issuing, keyFile := root.Intermediate(t, pkiDir, "cast-issuing")
	wantPin := pki.Pin(issuing.Cert())
	env := append([]string{"CAST_INSECURE="}, noHarnessAuth...)
	cp := testharness.StartProcEnv(t, env, filepath.Join(bins, "controlplane"), "--data-dir", dataDir, "--listen", addr,
		"--metrics-listen", "", "--ca-cert", issuing.File, "--ca-key", keyFile)
	var pin string
	testharness.WaitFor(t, 30*time.Second, "the CA pin in the log", func() bool {
		_, rest, ok := strings.Cut(cp.Output(), `"ca_pin":"`)
		pin, _, _ = strings.Cut(rest, `"`)
		return ok && pin != ""
	})
	if pin != wantPin {
		t.Fatalf("logged pin %s, want the operator CA's %s", pin, wantPin)
	}
	caFile := filepath.Join(dataDir, "ca.pem")
	written, err := os.ReadFile(caFile)
	must(t, err)
	if c, err := pki.ParseCert(written); err != nil || !c.Equal(issuing.Cert()) {
		t.Fatalf("ca.pem is not the operator CA: %v", err)
	}
	adminTok, err := secrets.ReadToken(filepath.Join(dataDir, "admin.token"))
	must(t, err)
	admin := cli{t: t, bin: filepath.Join(bins, "cast"), env: append(append([]string{}, env...), "CAST_ADDR="+addr, "CAST_TOKEN="+adminTok, "CAST_CACERT="+caFile)}
	// The pin is logged before the listener is up.
	testharness.WaitFor(t, 30*time.Second, "the control plane", func() bool { _, _, code := admin.run("token", "whoami"); return code == 0 })
	join := strings.TrimSpace(admin.must("node", "token", "create", "--ttl", "5m"))
	nodeDir := filepath.Join(t.TempDir(), "n1")
	agents := missingAgentsConfig(t)
	node := testharness.StartProcEnv(t, env, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", nodeDir, "--name", "n1",
		"--cast-bin", "", "--agents-config", agents, "--ca-pin", wantPin, "--join-token", join)
	admin.waitNode("n1", true)

	leaf := identityLeaf(t, filepath.Join(nodeDir, client.NodeIdentityFile))
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root.Cert())
	inters.AddCert(issuing.Cert())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the node's certificate does not chain to the company root: %v", err)
	}
	if leaf.Subject.CommonName != "n1" || leaf.CheckSignatureFrom(issuing.Cert()) != nil {
		t.Errorf("node certificate %q, not signed by the operator CA directly", leaf.Subject.CommonName)
	}

	// A certificate from before node metrics served TLS (no ServerAuth, no
	// node-metrics.cast.internal; signed here with the operator's key for
	// the same credential): the node renews it at start, and its metrics
	// then serve HTTPS under the operator CA.
	node.Kill()
	keyPEM, err := os.ReadFile(keyFile)
	must(t, err)
	certPEM, err := os.ReadFile(issuing.File)
	must(t, err)
	ca, err := pki.OperatorCA(certPEM, keyPEM, time.Now())
	must(t, err)
	key, err := pki.NewKey()
	must(t, err)
	csr, err := pki.CSR(key, "n1")
	must(t, err)
	chain, err := ca.SignClient(csr, pki.Identity{Role: "node", Name: "n1", Cred: leaf.Subject.SerialNumber}, time.Hour)
	must(t, err)
	kp, err := pki.KeyPEM(key)
	must(t, err)
	idPath := filepath.Join(nodeDir, client.NodeIdentityFile)
	must(t, os.WriteFile(idPath, append(chain, kp...), 0o600))
	if pki.ServesNodeMetrics(identityLeaf(t, idPath)) {
		t.Fatal("the old-style certificate serves metrics")
	}
	metrics := freeAddr(t)
	node = testharness.StartProcEnv(t, env, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", nodeDir, "--name", "n1",
		"--cast-bin", "", "--agents-config", agents, "--ca-pin", wantPin, "--metrics-listen", metrics)
	testharness.WaitFor(t, 30*time.Second, "the node to renew a certificate that cannot serve metrics", func() bool {
		return pki.ServesNodeMetrics(identityLeaf(t, idPath))
	})
	if !strings.Contains(node.Output(), "cannot serve metrics over TLS; renewing it now") {
		t.Errorf("no early renewal logged:\n%s", node.Output())
	}
	servesTLS(t, metrics, caFile, pki.NodeMetricsName, "cast_node_turns_total")
}
