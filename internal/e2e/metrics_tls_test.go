package e2e

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// scraper is an HTTPS client as Prometheus is configured for cast:
// trusting the CA in caFile and verifying serverName.
func scraper(t *testing.T, caFile, serverName string) *http.Client {
	t.Helper()
	b, err := os.ReadFile(caFile)
	must(t, err)
	cfg, err := pki.PoolConfig(b)
	must(t, err)
	cfg.ServerName = serverName
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// fetch GETs url; code 0 and the error when there is no HTTP answer.
func fetch(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// servesTLS checks a daemon's metrics listener at addr over TLS: HTTPS
// with caFile and serverName answers /healthz, /readyz and /metrics (with
// want in it); another server name, another CA, and plain HTTP get none
// of it.
func servesTLS(t *testing.T, addr, caFile, serverName, want string) {
	t.Helper()
	good := scraper(t, caFile, serverName)
	testharness.WaitFor(t, 30*time.Second, "https://"+addr+"/readyz", func() bool {
		code, _, _ := fetch(good, "https://"+addr+"/readyz")
		return code == http.StatusOK
	})
	if code, _, err := fetch(good, "https://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("https /healthz: %d %v", code, err)
	}
	if code, body, err := fetch(good, "https://"+addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("https /metrics: %d %v, want %s in it", code, err, want)
	}
	otherName := pki.ServerName
	if serverName == pki.ServerName {
		otherName = pki.NodeMetricsName
	}
	foreign := filepath.Join(t.TempDir(), "foreign-ca.pem")
	other, _, err := pki.NewCA(time.Hour)
	must(t, err)
	must(t, os.WriteFile(foreign, other, 0o644))
	for name, c := range map[string]*http.Client{"server name " + otherName: scraper(t, caFile, otherName), "another CA": scraper(t, foreign, serverName)} {
		var uerr *tls.CertificateVerificationError
		if code, _, err := fetch(c, "https://"+addr+"/metrics"); code != 0 || !errors.As(err, &uerr) {
			t.Errorf("%s: got %d %v, want a certificate verification error", name, code, err)
		}
	}
	code, body, err := fetch(&http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/metrics")
	if code != http.StatusBadRequest || strings.Contains(body, want) {
		t.Errorf("plain HTTP /metrics: %d %v %q, want 400 and no metrics", code, err, body)
	}
}

// impostor serves cert (a chain and key file) on a TLS listener; refused
// reports whether a client refused it (a failed handshake whose cause is
// the client's alert).
func impostor(t *testing.T, certFile string) (addr string, refused func() bool) {
	t.Helper()
	id, err := client.LoadIdentity(certFile)
	if err != nil || !id.HasCert() {
		t.Fatalf("%s: %v", certFile, err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", pki.ServeConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return id.Cert(), nil }))
	must(t, err)
	t.Cleanup(func() { lis.Close() })
	var bad atomic.Bool
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := c.(*tls.Conn).Handshake(); err != nil && strings.Contains(err.Error(), "bad certificate") {
					bad.Store(true)
				}
			}(c)
		}
	}()
	return lis.Addr().String(), bad.Load
}

// Metrics over TLS through the real binaries: the control plane's
// listener serves HTTPS with its certificate (the CA `cast ca` prints,
// the control plane's name), a node's with its own certificate from its
// join (the CA, pki.NodeMetricsName); plain HTTP, another CA and the
// other's name are refused. A node's certificate never passes for the control plane,
// to the cast CLI or to another node.
func TestMetricsOverTLS(t *testing.T) {
	t.Parallel()
	cpMetrics, nodeMetrics := freeAddr(t), freeAddr(t)
	r := newMTLSRig(t, "--metrics-listen", cpMetrics, "--node-cert-ttl", "1h")
	// The CA as an operator gets it for Prometheus: `cast ca` by the pin.
	caPEM := r.cast().must("ca", "--ca-pin", r.pin)
	if want, err := os.ReadFile(r.caFile); err != nil || caPEM != string(want) {
		t.Fatalf("cast ca printed %q, want DATA_DIR/ca.pem (%v)", caPEM, err)
	}
	if _, errOut, code := r.cast().run("ca", "--ca-pin", "sha256:"+strings.Repeat("0", 64)); code == 0 {
		t.Errorf("cast ca with a wrong pin: exit 0, %s", errOut)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	must(t, os.WriteFile(caFile, []byte(caPEM), 0o644))
	servesTLS(t, cpMetrics, caFile, pki.ServerName, "cast_controlplane_")

	join := strings.TrimSpace(r.admin.must("node", "token", "create", "--ttl", "5m"))
	_, dir := r.node("metered", "--join-token", join, "--metrics-listen", nodeMetrics)
	r.admin.waitNode("metered", true)
	servesTLS(t, nodeMetrics, caFile, pki.NodeMetricsName, "cast_node_turns_total")
	// Each daemon says when the certificates it holds expire (the
	// CastCertificateExpiring alert), and which build it runs.
	for addr, series := range map[string][]string{
		cpMetrics:   {`cast_cert_expiry_timestamp_seconds{cert="ca"}`, `cast_cert_expiry_timestamp_seconds{cert="serving"}`, "cast_build_info{"},
		nodeMetrics: {`cast_cert_expiry_timestamp_seconds{cert="client"}`, "cast_build_info{"},
	} {
		name := map[string]string{cpMetrics: pki.ServerName, nodeMetrics: pki.NodeMetricsName}[addr]
		_, body, err := fetch(scraper(t, caFile, name), "https://"+addr+"/metrics")
		must(t, err)
		for _, want := range series {
			if !strings.Contains(body, want) {
				t.Errorf("%s /metrics lacks %s", name, want)
			}
		}
	}

	// The node's own certificate, served as if it were the control plane.
	fake, refused := impostor(t, filepath.Join(dir, client.NodeIdentityFile))
	if _, errOut, code := r.admin.run("nodes", "--addr", fake, "--timeout", "5s"); code == 0 {
		t.Errorf("cast against a node's certificate: exit 0: %s", errOut)
	}
	// cast can exit before the impostor's side of the handshake has read
	// the alert it sent.
	testharness.WaitFor(t, 30*time.Second, "cast to refuse the node's certificate", refused)
	fake2, refused2 := impostor(t, filepath.Join(dir, client.NodeIdentityFile))
	evil, _ := r.node("evil", "--controlplane", fake2, "--join-token", join)
	testharness.WaitFor(t, 30*time.Second, "a node to refuse the node's certificate", func() bool {
		return refused2() && strings.Contains(evil.Output(), "not "+pki.ServerName)
	})
}

// Without --ca-pin a node's metrics are plain HTTP only with --insecure,
// which it warns of; otherwise it does not start.
func TestNodeMetricsPlaintextNeedsInsecure(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	cpAddr := freeAddr(t)
	testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", t.TempDir(), "--listen", cpAddr, "--metrics-listen", "", "--insecure")
	node := func(env []string, metrics string) *testharness.Proc {
		return testharness.StartProcEnv(t, env, filepath.Join(bins, "node"), "--controlplane", cpAddr, "--data-dir", t.TempDir(),
			"--name", "plain", "--cast-bin", "", "--agents-config", missingAgentsConfig(t), "--metrics-listen", metrics)
	}
	refused := node([]string{"CAST_INSECURE="}, freeAddr(t))
	if code, ok := refused.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(refused.Output(), "--metrics-listen serves HTTPS") {
		t.Errorf("node with --metrics-listen, no --ca-pin, no --insecure: exit %d (exited %v):\n%s", code, ok, refused.Output())
	}
	addr := freeAddr(t)
	plain := node(nil, addr) // the harness's CAST_INSECURE=1
	plainHTTP := &http.Client{Timeout: 5 * time.Second}
	testharness.WaitFor(t, 30*time.Second, "plain HTTP /readyz", func() bool {
		code, _, _ := fetch(plainHTTP, "http://"+addr+"/readyz")
		return code == http.StatusOK
	})
	if code, body, err := fetch(plainHTTP, "http://"+addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "cast_node_turns_total") {
		t.Errorf("plain HTTP /metrics: %d %v", code, err)
	}
	if !strings.Contains(plain.Output(), "serving plain HTTP metrics") {
		t.Errorf("no plaintext warning:\n%s", plain.Output())
	}
}
