package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/testharness"
)

// noHarnessAuth drops the harness's credentials from a process: the test
// uses the ones the control plane makes, as an operator does.
var noHarnessAuth = []string{"CAST_BOOTSTRAP_TOKEN=", "CAST_TOKEN=", "CAST_JOIN_TOKEN="}

func mode0600(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 0600", path, fi, err)
	}
}

// Through the real binaries: the first admin token, user tokens, a node
// joining with a one-time join token (and nodes without a valid one
// refused), users confined to their own sessions and kept off accounts
// and tokens, and revocation ending a node at once.
func TestAuthThroughRealProcesses(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	testharness.StartProcEnv(t, noHarnessAuth, filepath.Join(bins, "controlplane"), "--data-dir", dataDir,
		"--listen", addr, "--metrics-listen", "127.0.0.1:0")
	tokPath := filepath.Join(dataDir, "admin.token")
	testharness.WaitFor(t, 30*time.Second, "the first admin token", func() bool { _, err := os.Stat(tokPath); return err == nil })
	mode0600(t, tokPath)
	adminTok, err := secrets.ReadToken(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	as := func(tok string) cli {
		return cli{t: t, bin: filepath.Join(bins, "cast"), env: append(append([]string{}, noHarnessAuth...), "CAST_ADDR="+addr, "CAST_TOKEN="+tok)}
	}
	admin, anon := as(adminTok), as("")
	// The token is written before the listener is up.
	testharness.WaitFor(t, 30*time.Second, "the control plane", func() bool { _, _, code := admin.run("token", "whoami"); return code == 0 })
	alice := as(strings.TrimSpace(admin.must("token", "create", "--role", "user", "--name", "alice")))

	agents := missingAgentsConfig(t)
	startNode := func(name string, args ...string) *testharness.Proc {
		return testharness.StartProcEnv(t, noHarnessAuth, filepath.Join(bins, "node"), append([]string{"--controlplane", addr,
			"--data-dir", filepath.Join(dataDir, "node-"+name), "--name", name, "--cast-bin", "", "--agents-config", agents}, args...)...)
	}
	refusedNode := func(p *testharness.Proc, want string) {
		t.Helper()
		if code, ok := p.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(p.Output(), want) {
			t.Errorf("node without a valid join token: exit %d (exited %v), want an error saying %q:\n%s", code, ok, want, p.Output())
		}
	}
	refusedNode(startNode("n0"), "has no credential")
	refusedNode(startNode("n0", "--join-token", "cast_not-a-join-token-0000000000000000000000000000"), "join token is unknown")

	join := strings.TrimSpace(admin.must("node", "token", "create", "--ttl", "5m"))
	n1 := startNode("n1", "--join-token", join)
	admin.waitNode("n1", true)
	mode0600(t, filepath.Join(dataDir, "node-n1", "credential"))
	refusedNode(startNode("n2", "--join-token", join), "join token is unknown, used or expired") // one-time

	var sess struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(admin.must("new", "--agent", "claude", "--json", "admin's work")), &sess); err != nil || sess.ID == "" {
		t.Fatalf("cast new: %v", err)
	}
	refused := func(c cli, want string, args ...string) {
		t.Helper()
		if _, errOut, code := c.run(args...); code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("cast %s: exit %d, stderr %q; want a refusal saying %q", strings.Join(args, " "), code, errOut, want)
		}
	}
	refused(alice, "may not use session", "read", sess.ID)
	refused(alice, "may not use session", "send", "-s", sess.ID, "hi")
	refused(alice, "may not call ListAccounts", "account", "ls")
	refused(alice, "may not call CreateToken", "token", "create", "--role", "admin", "--name", "eve")
	refused(alice, "may not call CreateJoinToken", "node", "token", "create")
	refused(anon, "needs a credential", "ls")
	if out := alice.must("ls", "--json"); strings.Contains(out, sess.ID) {
		t.Errorf("alice's cast ls shows the admin's session:\n%s", out)
	}
	if out := alice.must("token", "whoami"); strings.TrimSpace(out) != "user:alice" {
		t.Errorf("whoami: %q", out)
	}

	// Revocation: the node's stream ends and the node stops, asking to join again.
	admin.must("node", "revoke", "n1")
	if code, ok := n1.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(n1.Output(), "join again") {
		t.Errorf("revoked node: exit %d (exited %v):\n%s", code, ok, n1.Output())
	}
	admin.waitNode("n1", false)
}

// The README's first command stays one command: `controlplane --dev`
// writes the local user a context, and cast works with no address or
// token given.
func TestDevModeWritesContext(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	home, addr := t.TempDir(), freeAddr(t)
	env := append(append([]string{}, noHarnessAuth...), "HOME="+home)
	testharness.StartProcEnv(t, env, filepath.Join(bins, "controlplane"), "--dev", "--data-dir", filepath.Join(home, "data"),
		"--listen", addr, "--metrics-listen", "", "--node-name", "devnode", "--log-format", "json")
	cfg := filepath.Join(home, ".config", "cast", "config.yaml")
	testharness.WaitFor(t, 30*time.Second, "the dev context", func() bool { _, err := os.Stat(cfg); return err == nil })
	mode0600(t, cfg)
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: append(env, "CAST_ADDR=", "XDG_CONFIG_HOME=")}
	c.waitNode("devnode", true)
	if out := c.must("token", "whoami"); strings.TrimSpace(out) != "admin:dev" {
		t.Errorf("whoami with the dev context: %q", out)
	}
}

// controlplane --tls through the real binaries: a node joins by CA pin,
// cast trusts DATA_DIR/ca.pem (CAST_CACERT), and plaintext gets nowhere.
func TestTLSThroughRealProcesses(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	cp := testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", dataDir, "--listen", addr,
		"--metrics-listen", "", "--tls")
	caFile := filepath.Join(dataDir, "ca.pem")
	var pin string
	testharness.WaitFor(t, 30*time.Second, "the CA pin in the log", func() bool {
		_, rest, ok := strings.Cut(cp.Output(), `"ca_pin":"`)
		pin, _, _ = strings.Cut(rest, `"`)
		return ok && pin != ""
	})
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr, "CAST_CACERT=" + caFile}}
	testharness.StartProc(t, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", t.TempDir(), "--name", "n1",
		"--cast-bin", "", "--agents-config", missingAgentsConfig(t), "--ca-pin", pin)
	c.waitNode("n1", true)
	plain := cli{t: t, bin: c.bin, env: []string{"CAST_ADDR=" + addr}}
	if _, errOut, code := plain.run("nodes", "--timeout", "3s"); code == 0 {
		t.Errorf("plaintext cast reached the TLS control plane: %s", errOut)
	}
}

// TLS is the default: a control plane given neither --tls nor --insecure
// serves TLS and plaintext gets no answer; plaintext needs an explicit
// --insecure (CAST_INSECURE=1), which warns at every start and serves its
// metrics listener as plain HTTP.
func TestPlaintextNeedsInsecure(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	noInsecure := []string{"CAST_INSECURE="}
	args := func() []string {
		return []string{"--data-dir", t.TempDir(), "--listen", freeAddr(t), "--metrics-listen", ""}
	}
	def := args()
	tlsByDefault := testharness.StartProcEnv(t, noInsecure, filepath.Join(bins, "controlplane"), def...)
	testharness.WaitFor(t, 30*time.Second, "TLS on by default", func() bool { return strings.Contains(tlsByDefault.Output(), `"tls on"`) })
	plain := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + def[3]}}
	if _, errOut, code := plain.run("nodes", "--timeout", "3s"); code == 0 || !strings.Contains(errOut, "speaks TLS, but no CA is trusted for it") {
		t.Errorf("plaintext cast against the default control plane: exit %d, %s", code, errOut)
	}
	refused := testharness.StartProcEnv(t, noInsecure, filepath.Join(bins, "controlplane"), append(args(), "--tls=false")...)
	if code, ok := refused.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(refused.Output(), "--insecure") {
		t.Errorf("plaintext control plane without --insecure: exit %d (exited %v):\n%s", code, ok, refused.Output())
	}
	metrics := freeAddr(t)
	warned := testharness.StartProcEnv(t, noInsecure, filepath.Join(bins, "controlplane"), append(args(), "--insecure", "--metrics-listen", metrics)...)
	testharness.WaitFor(t, 30*time.Second, "the plaintext warning", func() bool { return strings.Contains(warned.Output(), "serving plaintext gRPC and HTTP") })
	// --insecure: the metrics listener is plain HTTP too (TestMetricsOverTLS
	// has it HTTPS by default).
	testharness.WaitFor(t, 30*time.Second, "plain HTTP /readyz", func() bool {
		code, _, _ := fetch(&http.Client{Timeout: 5 * time.Second}, "http://"+metrics+"/readyz")
		return code == http.StatusOK
	})
}
