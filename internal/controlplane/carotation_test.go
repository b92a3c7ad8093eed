package controlplane_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// servedPin is the pin of the CA that signs the certificate addr serves.
func servedPin(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the chain only
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	chain := conn.ConnectionState().PeerCertificates
	if len(chain) < 2 {
		t.Fatalf("%s served %d certificates", addr, len(chain))
	}
	return pki.Pin(chain[1])
}

// A CA rotation across two replicas over one etcd: each step taken on one
// replica reaches the other without a restart (the server certificate
// moves to the new CA, the old CA's certificates pass until retired), a
// client following the bundle keeps working on both, and retiring is
// refused while a user's latest certificate is from the old CA.
func TestCARotationAcrossReplicas(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	key := filepath.Join(t.TempDir(), "secrets.key")
	cfg := func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir, c.SecretsKeyFile = []string{ep}, "", key
		c.TLS.Enabled, c.TLS.CAReload = true, 50*time.Millisecond
	}
	a := testharness.StartControlPlane(t, cfg)
	b := testharness.StartControlPlane(t, cfg)
	oldPin := a.CAPin()
	if b.CAPin() != oldPin {
		t.Fatalf("replicas serve different CAs: %s, %s", oldPin, b.CAPin())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminA, trustA := testharness.DialFollowing(t, a.Addr(), oldPin, testharness.AdminToken(), nil)
	adminB, trustB := testharness.DialFollowing(t, b.Addr(), oldPin, testharness.AdminToken(), nil)

	// alice's certificate from the old CA.
	_, oldID := aliceCert(ctx, t, adminA, a.Addr(), oldPin)
	aliceOld, _ := testharness.DialFollowing(t, b.Addr(), oldPin, "", oldID)
	whoami := func(c *client.Client) error {
		_, err := c.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
		return err
	}
	// Node n1 joins with a certificate from the old CA and renews it by
	// hand (a node daemon renews at two thirds of its lifetime).
	n1ID, err := client.LoadIdentity(filepath.Join(t.TempDir(), "n1.pem"))
	must(t, err)
	must(t, n1ID.Renew(ctx, "n1", adminA.JoinSigner("n1", testharness.AdminToken())))
	n1, _ := testharness.DialFollowing(t, a.Addr(), oldPin, "", n1ID)
	renewN1 := func() {
		t.Helper()
		must(t, n1ID.Renew(ctx, "n1", func(ctx context.Context, csr []byte) ([]byte, error) {
			r, err := n1.Auth.IssueCertificate(ctx, &castv1.IssueCertificateRequest{Csr: csr})
			return r.GetCertificate(), err
		}))
		must(t, n1.Redial(time.Second)) // as the node does: later calls present the new one
	}
	refusedNaming := func(what string, err error, want, notWant string) {
		t.Helper()
		wantCode(t, what, err, codes.FailedPrecondition, "CA_IN_USE")
		if err == nil || !strings.Contains(err.Error(), want) || (notWant != "" && strings.Contains(err.Error(), notWant)) {
			t.Errorf("%s: the refusal should name %q and not %q: %v", what, want, notWant, err)
		}
	}

	// Steps out of order are refused.
	_, err = adminA.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	wantCode(t, "activate before rotate", err, codes.FailedPrecondition, "CA_ROTATION_STATE")
	rot, err := adminA.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	must(t, err)
	newPin := rot.Next.Pin
	_, err = adminB.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	wantCode(t, "a second rotate", err, codes.FailedPrecondition, "CA_ROTATION_STATE")
	// B reloads the record; its client learns the bundle {old, new} from
	// a reply header.
	st, err := adminA.Auth.GetCAStatus(ctx, &castv1.GetCAStatusRequest{})
	must(t, err)
	if len(st.Cas) != 2 || st.Cas[0].Pin != oldPin || st.Cas[1].Pin != newPin || st.Cas[1].State != "next" {
		t.Fatalf("status after rotate: %v", st.Cas)
	}
	if trustA.Hash() != st.BundleHash {
		t.Error("the client on A did not learn the bundle from its reply")
	}
	testharness.WaitFor(t, 10*time.Second, "the client on B to learn the bundle", func() bool {
		return whoami(adminB) == nil && trustB.Hash() == st.BundleHash
	})
	if servedPin(t, b.Addr()) != oldPin {
		t.Error("B serves the new CA before activate")
	}
	must(t, whoami(aliceOld)) // alice's client learns the bundle too

	// n1 has not renewed since the rotation began: it does not trust the
	// new CA yet.
	_, err = adminB.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	refusedNaming("activate before n1 renewed", err, "n1", "")
	renewN1()
	_, err = adminB.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	must(t, err)
	testharness.WaitFor(t, 10*time.Second, "A's server certificate from the new CA", func() bool { return servedPin(t, a.Addr()) == newPin })
	if servedPin(t, b.Addr()) != newPin {
		t.Error("B, where activate ran, still serves the old CA")
	}
	must(t, whoami(adminA))
	must(t, whoami(adminB))
	must(t, whoami(aliceOld)) // the old CA's certificate still works

	must(t, whoami(n1)) // n1's old-CA certificate still works
	_, err = adminA.Auth.RetireCA(ctx, &castv1.RetireCARequest{})
	refusedNaming("retire under n1's and alice's old certificates", err, "nodes n1", "")
	refusedNaming("retire under n1's and alice's old certificates", err, "user:alice", "")
	renewN1() // now from the new CA
	_, err = adminA.Auth.RetireCA(ctx, &castv1.RetireCARequest{})
	refusedNaming("retire under alice's old certificate", err, "user:alice", "n1")
	ret, err := adminA.Auth.RetireCA(ctx, &castv1.RetireCARequest{Force: true})
	must(t, err)
	if ret.Retired.Pin != oldPin {
		t.Errorf("retired %s, want %s", ret.Retired.Pin, oldPin)
	}
	testharness.WaitFor(t, 10*time.Second, "B to refuse the old CA's certificate", func() bool {
		err := whoami(aliceOld)
		return status.Code(err) == codes.Unauthenticated && client.ReasonOf(err) == "CERT_UNTRUSTED" && strings.Contains(err.Error(), "retired")
	})
	must(t, whoami(adminA))
	must(t, whoami(adminB))
	must(t, whoami(n1)) // on its certificate from the new CA
	st, err = adminB.Auth.GetCAStatus(ctx, &castv1.GetCAStatusRequest{})
	must(t, err)
	if len(st.Cas) != 1 || st.Cas[0].Pin != newPin || st.Cas[0].State != "signing" {
		t.Errorf("status after retire: %v", st.Cas)
	}
}

// aliceCert makes user alice (by admin) and her certificate from the
// CA addr signs with now; it returns her token and her identity.
func aliceCert(ctx context.Context, t *testing.T, admin *client.Client, addr, pin string) (string, *client.Identity) {
	t.Helper()
	tok, err := admin.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "alice", Role: castv1.Role_ROLE_USER})
	must(t, err)
	withToken, _ := testharness.DialFollowing(t, addr, pin, tok.Token, nil)
	id, err := client.LoadIdentity(filepath.Join(t.TempDir(), "alice-old.pem"))
	must(t, err)
	must(t, id.Renew(ctx, "alice", issuer(withToken)))
	return tok.Token, id
}

// issuer gets certificates from c's IssueCertificate.
func issuer(c *client.Client) client.Signer {
	return func(ctx context.Context, csr []byte) ([]byte, error) {
		r, err := c.Auth.IssueCertificate(ctx, &castv1.IssueCertificateRequest{Csr: csr})
		return r.GetCertificate(), err
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code || client.ReasonOf(err) != reason {
		t.Errorf("%s: got %v (reason %q), want %s %s", what, err, client.ReasonOf(err), code, reason)
	}
}

// An operator's CA (--ca-cert) rotates to another of the operator's
// (`cast ca rotate --cert --key`), whose key is then kept sealed in the
// store; a replica restarted with the old --ca-cert serves the store's CA
// (with a warning) instead of refusing to start.
func TestOperatorCARotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := testharness.NewCA(t, dir, "company-root")
	first, firstKey := root.Intermediate(t, dir, "issuing-1")
	second, secondKey := root.Intermediate(t, dir, "issuing-2")
	dataDir := filepath.Join(t.TempDir(), "etcd")
	cfg := func(c *controlplane.Config) {
		c.DataDir, c.TLS.Enabled, c.TLS.CACertFile, c.TLS.CAKeyFile = dataDir, true, first.File, firstKey
	}
	a := testharness.StartControlPlane(t, cfg)
	oldPin, newPin := pki.Pin(first.Cert()), pki.Pin(second.Cert())
	if a.CAPin() != oldPin {
		t.Fatalf("serving %s, want the operator CA %s", a.CAPin(), oldPin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testharness.DialFollowing(t, a.Addr(), oldPin, testharness.AdminToken(), nil)
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		must(t, err)
		return b
	}
	for _, bad := range []struct {
		name      string
		cert, key []byte
	}{
		{"a certificate without its key", read(second.File), nil},
		{"a key that is not the CA's", read(second.File), read(firstKey)},
		{"a CA bundle instead of one CA", append(read(second.File), read(first.File)...), read(secondKey)},
	} {
		_, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{CertPem: bad.cert, KeyPem: bad.key})
		wantCode(t, bad.name, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	}
	rot, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{CertPem: read(second.File), KeyPem: read(secondKey)})
	must(t, err)
	if rot.Next.Pin != newPin {
		t.Fatalf("next CA %s, want the operator's second %s", rot.Next.Pin, newPin)
	}
	_, err = admin.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}) // learns the bundle
	must(t, err)
	_, err = admin.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	must(t, err)
	if servedPin(t, a.Addr()) != newPin {
		t.Fatal("the server certificate did not move to the second CA")
	}
	_, err = admin.Auth.RetireCA(ctx, &castv1.RetireCARequest{})
	must(t, err)

	a.Stop()
	b := testharness.StartControlPlane(t, cfg) // the old unit file: --ca-cert issuing-1
	if b.CAPin() != newPin || servedPin(t, b.Addr()) != newPin {
		t.Fatalf("restarted with the rotated-away --ca-cert: serving %s, want %s", b.CAPin(), newPin)
	}
	again, _ := testharness.DialFollowing(t, b.Addr(), newPin, testharness.AdminToken(), nil)
	_, err = again.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
	must(t, err)
}

// A renewal on a replica that has not yet reloaded the rotation (its
// reload is slow, or the step ran on another replica a moment ago) hands
// the node a bundle without the new CA. It must not count as the node
// having learnt the new CA: activate is refused naming it, as before any
// renewal, until a renewal that carried the new CA.
func TestActivateWaitsForARenewalThatCarriedTheNewCA(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	key := filepath.Join(t.TempDir(), "secrets.key")
	cfg := func(reload time.Duration, watch bool) func(c *controlplane.Config) {
		return func(c *controlplane.Config) {
			c.EtcdEndpoints, c.DataDir, c.SecretsKeyFile = []string{ep}, "", key
			c.TLS.Enabled, c.TLS.CAReload, c.TLS.NoCAWatch = true, reload, !watch
		}
	}
	a := testharness.StartControlPlane(t, cfg(50*time.Millisecond, true))
	b := testharness.StartControlPlane(t, cfg(time.Hour, false)) // never reloads during the test
	oldPin := a.CAPin()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminA, _ := testharness.DialFollowing(t, a.Addr(), oldPin, testharness.AdminToken(), nil)
	n1ID, err := client.LoadIdentity(filepath.Join(t.TempDir(), "n1.pem"))
	must(t, err)
	must(t, n1ID.Renew(ctx, "n1", adminA.JoinSigner("n1", testharness.AdminToken())))
	renewOn := func(addr string) *castv1.IssueCertificateResponse {
		t.Helper()
		n1, _ := testharness.DialFollowing(t, addr, oldPin, "", n1ID)
		var resp *castv1.IssueCertificateResponse
		must(t, n1ID.Renew(ctx, "n1", func(ctx context.Context, csr []byte) ([]byte, error) {
			r, err := n1.Auth.IssueCertificate(ctx, &castv1.IssueCertificateRequest{Csr: csr})
			resp = r
			return r.GetCertificate(), err
		}))
		return resp
	}

	rot, err := adminA.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	must(t, err)
	stale := renewOn(b.Addr())
	cas, err := pki.ParseBundle(stale.CaBundle)
	must(t, err)
	for _, c := range cas {
		if pki.Pin(c) == rot.Next.Pin {
			t.Fatal("B gave the new CA: the test needs a replica that has not reloaded")
		}
	}
	_, err = adminA.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	wantCode(t, "activate after a renewal without the new CA", err, codes.FailedPrecondition, "CA_IN_USE")
	if err == nil || !strings.Contains(err.Error(), "n1") {
		t.Errorf("the refusal should name n1: %v", err)
	}
	renewOn(a.Addr()) // A's bundle holds the new CA
	_, err = adminA.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	must(t, err)
}

// A replica that cannot load the store's CA record (here: it runs on the
// operator's CA without the secrets key that now seals the signing one)
// keeps what it had, but it stops trusting a CA the record retired: a
// certificate from it is refused there too, not only on the replicas
// that followed.
func TestRetiredCARefusedByAReplicaThatCannotLoadTheRecord(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	dir := t.TempDir()
	root := testharness.NewCA(t, dir, "company-root")
	first, firstKey := root.Intermediate(t, dir, "issuing-1")
	secrets := filepath.Join(t.TempDir(), "secrets.key")
	cfg := func(secretsKey string) func(c *controlplane.Config) {
		return func(c *controlplane.Config) {
			c.EtcdEndpoints, c.DataDir, c.SecretsKeyFile = []string{ep}, "", secretsKey
			c.TLS.Enabled, c.TLS.CAReload = true, 50*time.Millisecond
			c.TLS.CACertFile, c.TLS.CAKeyFile = first.File, firstKey
		}
	}
	a := testharness.StartControlPlane(t, cfg(secrets))
	b := testharness.StartControlPlane(t, cfg("")) // no secrets key
	oldPin := a.CAPin()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testharness.DialFollowing(t, a.Addr(), oldPin, testharness.AdminToken(), nil)
	aliceToken, oldID := aliceCert(ctx, t, admin, a.Addr(), oldPin)
	onB, _ := testharness.DialFollowing(t, b.Addr(), oldPin, "", oldID)
	whoami := func() error {
		_, err := onB.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
		return err
	}
	must(t, whoami())

	_, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	must(t, err)
	// Activate on B: stored, but B cannot load it, and says so.
	adminB, _ := testharness.DialFollowing(t, b.Addr(), oldPin, testharness.AdminToken(), nil)
	_, err = adminB.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	wantCode(t, "activate on B", err, codes.FailedPrecondition, "CA_NOT_LOADABLE")
	if err == nil || !strings.Contains(err.Error(), "secrets-key-file") {
		t.Errorf("the refusal should say what B lacks: %v", err)
	}
	_, err = admin.Auth.RetireCA(ctx, &castv1.RetireCARequest{Force: true})
	must(t, err)
	testharness.WaitFor(t, 10*time.Second, "B to refuse the retired CA's certificate", func() bool {
		err := whoami()
		return status.Code(err) == codes.Unauthenticated && client.ReasonOf(err) == "CERT_UNTRUSTED" && strings.Contains(err.Error(), "retired")
	})
	// B still signs with the retired CA: it issues nothing that would be
	// refused at once.
	aliceOnB, _ := testharness.DialFollowing(t, b.Addr(), oldPin, aliceToken, nil)
	newID, err := client.LoadIdentity(filepath.Join(t.TempDir(), "alice-new.pem"))
	must(t, err)
	wantCode(t, "a certificate from B", newID.Renew(ctx, "alice", issuer(aliceOnB)), codes.Unavailable, "UNAVAILABLE")
}

// A node that makes no call (no turn, no fleet account) and whose
// certificate is days from renewal still stops trusting a CA once it is
// retired: it asks for the bundle every BundleInterval, so its
// ca-bundle.pem drops the CA within that, not at its next renewal.
func TestIdleNodeDropsARetiredCA(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled = true })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testharness.DialFollowing(t, srv.Addr(), srv.CAPin(), testharness.AdminToken(), nil)
	oldPin := srv.CAPin()
	rot, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	must(t, err)
	_, err = admin.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{})
	must(t, err)
	var dataDir string
	testharness.StartNode(t, srv.Addr(), "idle", func(c *node.Config) {
		c.CAPin, c.BundleInterval, dataDir = rot.Next.Pin, 100*time.Millisecond, c.DataDir
	})
	bundlePins := func() map[string]bool {
		b, err := os.ReadFile(node.BundlePath(dataDir))
		if err != nil {
			return nil
		}
		cas, err := pki.ParseBundle(b)
		if err != nil {
			return nil
		}
		pins := map[string]bool{}
		for _, c := range cas {
			pins[pki.Pin(c)] = true
		}
		return pins
	}
	testharness.WaitFor(t, 20*time.Second, "the node to join and keep the bundle of both CAs", func() bool {
		p := bundlePins()
		return len(p) == 2 && p[oldPin] && p[rot.Next.Pin]
	})
	_, err = admin.Auth.RetireCA(ctx, &castv1.RetireCARequest{})
	must(t, err)
	testharness.WaitFor(t, 10*time.Second, "the idle node to drop the retired CA", func() bool {
		p := bundlePins()
		return len(p) == 1 && p[rot.Next.Pin]
	})
}

// A rotation that cannot open the secrets key (its file was made readable
// by others after the start) is refused with the key's own reason, not as
// a store outage to retry.
func TestRotateCASaysWhyTheSecretsKeyCannotBeOpened(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "secrets.key")
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled, c.SecretsKeyFile = true, key })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testharness.DialFollowing(t, srv.Addr(), srv.CAPin(), testharness.AdminToken(), nil)
	must(t, os.Chmod(key, 0o644))
	_, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	wantCode(t, "rotate with a secrets key file others can read", err, codes.FailedPrecondition, errs.ReasonNoSecretsKey)
	if !strings.Contains(status.Convert(err).Message(), "chmod 600 "+key) {
		t.Errorf("the refusal does not say how to fix the key file: %v", err)
	}
}
