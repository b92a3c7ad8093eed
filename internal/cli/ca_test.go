package cli

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// After `cast ca activate` a client's CA file holds the old CA first and
// the new one (the bundle's set did not change, so the file was not
// rewritten). The pin the CLI suggests for new nodes, and the CA `cast ca`
// prints, are the CA that signs the server's certificate now, not the
// file's first.
func TestCAPinIsTheSigningCA(t *testing.T) {
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled = true })
	oldPin := srv.CAPin()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testharness.DialFollowing(t, srv.Addr(), oldPin, testharness.AdminToken(), nil)
	rot, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := admin.Auth.GetCABundle(ctx, &castv1.GetCABundleRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{}); err != nil {
		t.Fatal(err)
	}
	cas, err := pki.ParseBundle(bundle.Bundle)
	if err != nil || len(cas) != 2 || pki.Pin(cas[0]) != oldPin {
		t.Fatalf("bundle after rotate: %v %v", cas, err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pki.BundlePEM([]*x509.Certificate{cas[0], cas[1]}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAST_ADDR", srv.Addr())
	t.Setenv("CAST_CACERT", caFile)

	var out, errOut bytes.Buffer
	if code := Main(ctx, []string{"node", "token", "create"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("node token create: %d %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "--ca-pin "+rot.Next.Pin) {
		t.Errorf("node token create suggests another pin than the signing CA's %s: %s", rot.Next.Pin, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := Main(ctx, []string{"ca"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("cast ca: %d %s", code, errOut.String())
	}
	if c, err := pki.ParseCert(out.Bytes()); err != nil || pki.Pin(c) != rot.Next.Pin {
		t.Errorf("cast ca printed another CA than the signing one: %v", err)
	}
}

// `cast ca rotate --key` reads an operator CA's private key as the control
// plane's --ca-key does: a key file others can read is refused (with the
// chmod to run) before it is sent, and no rotation starts.
func TestCARotateRefusesAKeyOthersCanRead(t *testing.T) {
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled = true })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	next, keyFile := testharness.NewCA(t, dir, "company-root").Intermediate(t, dir, "issuing-2")
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAST_ADDR", srv.Addr())
	t.Setenv("CAST_CA_PIN", srv.CAPin())

	var out, errOut bytes.Buffer
	code := Main(ctx, []string{"ca", "rotate", "--cert", next.File, "--key", keyFile}, nil, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "chmod 600 "+keyFile) {
		t.Errorf("cast ca rotate with a key file of mode 0644: exit %d, stderr %q; want a refusal naming chmod 600", code, errOut.String())
	}
	admin, _ := testharness.DialFollowing(t, srv.Addr(), srv.CAPin(), testharness.AdminToken(), nil)
	st, err := admin.Auth.GetCAStatus(ctx, &castv1.GetCAStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Cas) != 1 {
		t.Errorf("a rotation started with a key others can read: %v", st.Cas)
	}
}
