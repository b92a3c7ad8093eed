package client

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/pki"
)

// Reload takes the identity file's certificate when it outlives the one
// held (a node's other process, or another renewal, replaced the file),
// and never goes back to an earlier one.
func TestIdentityReloadTakesANewerCertificate(t *testing.T) {
	ca := testCA(t)
	path := filepath.Join(t.TempDir(), "identity.pem")
	writer, err := LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	renew := func(ttl time.Duration) time.Time {
		t.Helper()
		err := writer.Renew(context.Background(), "n1", func(_ context.Context, csr []byte) ([]byte, error) {
			return ca.SignClient(csr, pki.Identity{Role: "node", Name: "n1", Cred: "c1"}, ttl)
		})
		if err != nil {
			t.Fatal(err)
		}
		return writer.Cert().Leaf.NotAfter
	}
	renew(20 * time.Minute)
	held, err := LoadIdentity(path)
	if err != nil || !held.HasCert() {
		t.Fatalf("load: %v", err)
	}
	if held.Reload() {
		t.Error("Reload took the certificate it holds again")
	}
	newer := renew(40 * time.Minute)
	if !held.Reload() || !held.Cert().Leaf.NotAfter.Equal(newer) {
		t.Errorf("Reload of a renewed file: holds one until %s, want %s", held.Cert().Leaf.NotAfter, newer)
	}
	renew(10 * time.Minute)
	if held.Reload() || !held.Cert().Leaf.NotAfter.Equal(newer) {
		t.Errorf("Reload of an earlier certificate: holds one until %s, want %s kept", held.Cert().Leaf.NotAfter, newer)
	}
}
