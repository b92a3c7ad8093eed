package testharness

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/pki"
)

// Every control plane a test starts has auth on, as a real one does. The
// harness gives all of them one admin token, made once per test binary:
// control planes take it as their first admin token
// (CAST_BOOTSTRAP_TOKEN), the cast CLI and Dial present it (CAST_TOKEN),
// and nodes enroll with it on first start (CAST_JOIN_TOKEN; an admin token
// may enroll a node), getting their own credentials; control planes serve
// plaintext on loopback (CAST_INSECURE). Tests about auth override these
// per call.

// AdminToken is the admin token of every control plane the harness starts.
var AdminToken = sync.OnceValue(func() string {
	tok, err := authz.NewToken()
	if err != nil {
		panic(err)
	}
	return tok
})

// AuthEnv is the environment that gives a process the harness's
// credentials.
func AuthEnv() []string {
	return []string{controlplane.BootstrapTokenEnv + "=" + AdminToken(), "CAST_TOKEN=" + AdminToken(), "CAST_JOIN_TOKEN=" + AdminToken(),
		"CAST_INSECURE=1"} // control planes serve plaintext on loopback
}

// ForeignCert writes a client certificate file (chain and key, 0600) for
// id from a CA of its own, which no control plane trusts.
func ForeignCert(t testing.TB, id pki.Identity) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "foreign.pem")
	caPEM, caKey, err := pki.NewCA(time.Hour)
	if err == nil {
		var ca *pki.CA
		if ca, err = pki.LoadCA(caPEM, caKey); err == nil {
			err = writeClientCert(ca, id, path)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func writeClientCert(ca *pki.CA, id pki.Identity, path string) error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.CSR(key, id.Name)
	if err != nil {
		return err
	}
	chain, err := ca.SignClient(csr, id, time.Hour)
	if err != nil {
		return err
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(chain, keyPEM...), 0o600)
}
