package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// bundlePins is the pins of the CAs in a bundle file.
func bundlePins(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	cas, err := pki.ParseBundle(b)
	must(t, err)
	var pins []string
	for _, c := range cas {
		pins = append(pins, pki.Pin(c))
	}
	return pins
}

func samePins(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}

// A CA rotation with an overlap while a real Claude Code turn runs on a
// real node process: `cast ca rotate` (the node learns the bundle at its
// renewal, the CLI at its next command, each over a connection it
// verified), `cast ca activate` (refused, naming the node, until it has
// renewed; then the server certificate and the node's next certificate
// come from the new CA), `cast ca retire` (refused naming the node while
// its latest certificate is the old CA's); after it a certificate from
// the old CA is refused as retired, the CLI and the node keep working,
// and the turn's every row is stored once, in order.
func TestCARotationUnderRunningTurn(t *testing.T) {
	t.Parallel()
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) {
		c.TLS.Enabled, c.TLS.NodeCertTTL, c.TLS.CAReload = true, 8*time.Second, 200*time.Millisecond
	}, "claude")
	var oldPin string
	for i, a := range r.nodeArgs {
		if a == "--ca-pin" {
			oldPin = r.nodeArgs[i+1]
		}
	}
	// The test's own client follows the bundle too (the harness's pins).
	r.c, _ = testharness.DialFollowing(t, r.addr, oldPin, testharness.AdminToken(), nil)
	ctx := context.Background()

	// The admin's and bob's cast read contexts whose CA files are copies.
	bundle, err := r.c.Auth.GetCABundle(ctx, &castv1.GetCABundleRequest{})
	must(t, err)
	castAs := func(name, token string) (cli, string) {
		home := t.TempDir()
		cfgDir := filepath.Join(home, ".config", "cast")
		must(t, os.MkdirAll(cfgDir, 0o700))
		caFile := filepath.Join(cfgDir, "prod-ca.pem")
		must(t, os.WriteFile(caFile, bundle.Bundle, 0o644))
		must(t, client.SetContext(filepath.Join(cfgDir, "config.yaml"), "prod", client.Context{Addr: r.addr, Token: token, CA: caFile}))
		return cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: append(append([]string{}, noHarnessAuth...),
			"CAST_INSECURE=", "CAST_ADDR=", "CAST_CACERT=", "CAST_CONTEXT=", "HOME="+home, "XDG_CONFIG_HOME=")}, caFile
	}
	admin, adminCA := castAs("admin", testharness.AdminToken())
	bobTok := strings.TrimSpace(admin.must("token", "create", "--role", "user", "--name", "bob"))
	bob, _ := castAs("bob", bobTok)
	var certOut struct {
		Cert string `json:"cert"`
	}
	must(t, json.Unmarshal([]byte(bob.must("token", "cert", "--json")), &certOut))
	bobCertFile := certOut.Cert
	bobOld := filepath.Join(t.TempDir(), "bob-old.pem")
	b, err := os.ReadFile(bobCertFile)
	must(t, err)
	must(t, os.WriteFile(bobOld, b, 0o600))

	// A turn held on the model across the whole rotation.
	turn := startHeldReadTurn(t, r, 3, 3, "ROTATED TURN DONE")

	// Phase 1: rotate. The CLI learns the bundle on its next command.
	out := admin.must("ca", "rotate")
	_, rest, _ := strings.Cut(out, "new CA ")
	newPin, _, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(newPin, pki.PinPrefix) || newPin == oldPin {
		t.Fatalf("cast ca rotate: %q", out)
	}
	admin.must("ca", "status")
	if got := bundlePins(t, adminCA); !samePins(got, oldPin, newPin) {
		t.Fatalf("the admin's CA file after rotate holds %v, want the old and the new CA", got)
	}
	bob.must("token", "whoami") // bob's cast learns it too
	// Not before the node has renewed since the rotation began.
	_, errOut, code := admin.run("ca", "activate")
	activated := code == 0
	if activated {
		t.Log("activate passed at once: the node renewed in between")
	} else if !strings.Contains(errOut, "worker") || !strings.Contains(errOut, "have not renewed") {
		t.Fatalf("cast ca activate refused without naming the node: %s", errOut)
	}
	nodeBundle := filepath.Join(r.dataDir, client.NodeBundleFile)
	testharness.WaitFor(t, 30*time.Second, "the node to learn the bundle", func() bool {
		_, err := os.Stat(nodeBundle)
		return err == nil && samePins(bundlePins(t, nodeBundle), oldPin, newPin)
	})
	mode0600(t, nodeBundle)
	testharness.WaitFor(t, 30*time.Second, "cast ca activate once the node renewed", func() bool {
		if !activated {
			_, _, code := admin.run("ca", "activate")
			activated = code == 0
		}
		return activated
	})

	// Phase 2: the node renews onto the new CA; the old CA's certificates
	// (bob's) still work.
	idPath := filepath.Join(r.dataDir, client.NodeIdentityFile)
	testharness.WaitFor(t, 30*time.Second, "the node's certificate from the new CA", func() bool {
		return issuerPin(idPath) == newPin
	})
	if who := strings.TrimSpace(bob.must("token", "whoami")); who != "user:bob" {
		t.Errorf("bob's old-CA certificate during the overlap: %q", who)
	}
	bob.must("token", "cert") // bob renews onto the new CA

	// Phase 3: retire, once no latest certificate is the old CA's.
	_, errOut, code = admin.run("ca", "retire")
	retired := code == 0
	if !retired && !strings.Contains(errOut, "worker") {
		t.Fatalf("cast ca retire refused without naming the node: %s", errOut)
	}
	testharness.WaitFor(t, 30*time.Second, "cast ca retire", func() bool {
		if !retired {
			_, _, code := admin.run("ca", "retire")
			retired = code == 0
		}
		return retired
	})
	if _, errOut, code := testharness.Run(t, append(bob.env, "CAST_CLIENT_CERT="+bobOld), bob.bin, "token", "whoami"); code == 0 || !strings.Contains(errOut, "retired") {
		t.Errorf("bob's old-CA certificate after retire: exit %d, %s", code, errOut)
	}
	if who := strings.TrimSpace(bob.must("token", "whoami")); who != "user:bob" {
		t.Errorf("bob's new certificate after retire: %q", who)
	}
	admin.must("ca", "status")
	if got := bundlePins(t, adminCA); !samePins(got, newPin) {
		t.Errorf("the admin's CA file after retire holds %v, want only the new CA", got)
	}
	testharness.WaitFor(t, 30*time.Second, "the node to drop the old CA", func() bool { return samePins(bundlePins(t, nodeBundle), newPin) })

	// The turn finishes with every row once and in order.
	turn.finish(t, r)
}

// issuerPin is the pin of the CA in the chain of the identity at path.
func issuerPin(path string) string {
	id, err := client.LoadIdentity(path)
	if err != nil || !id.HasCert() || len(id.Cert().Certificate) < 2 {
		return ""
	}
	chain := id.Cert().Certificate
	ca, err := x509.ParseCertificate(chain[len(chain)-1])
	if err != nil {
		return ""
	}
	return pki.Pin(ca)
}
