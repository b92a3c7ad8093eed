package catrust_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// replica is one control plane's trust over the shared store.
func replica(t *testing.T, st *store.Store, box *secrets.Box) *catrust.Manager {
	t.Helper()
	m := catrust.New(st, catrust.Config{Box: func() (*secrets.Box, error) { return box, nil }, CATTL: time.Hour}, zap.NewNop())
	rec, ok, err := st.GetCA(context.Background())
	if err != nil || !ok {
		t.Fatalf("no CA record: %v", err)
	}
	if err := m.Apply(rec); err != nil {
		t.Fatal(err)
	}
	return m
}

// A rotation through the store: each step is refused while it would lock
// someone out (naming them), taken when nobody is behind, and reaches a
// second replica on its next reload; the retired CA's certificates are
// then named as retired.
func TestRotationSteps(t *testing.T) {
	ctx := context.Background()
	st := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	key := make([]byte, secrets.KeySize)
	_, _ = rand.Read(key)
	box, _ := secrets.NewBox(key)
	certPEM, keyDER, err := pki.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := box.Seal(keyDER, catrust.KeyAAD)
	if err := st.PutCAIfAbsent(ctx, catrust.Record{CertPEM: certPEM, SealedKey: sealed}); err != nil {
		t.Fatal(err)
	}
	a, b := replica(t, st, box), replica(t, st, box)
	// A node's live credential: only live credentials' certificates count.
	if err := st.CreateToken(ctx, "h1", "node", "n1"); err != nil {
		t.Fatal(err)
	}
	first := a.Current().Signer
	nodeCert := func(issuer *pki.CA, trusts []string) {
		t.Helper()
		if err := st.RecordCertIssue(ctx, catrust.CertIssue{Cred: "h1", Role: "node", Name: "n1", IssuerPin: pki.Pin(issuer.Cert),
			Issued: time.Now(), Expires: time.Now().Add(time.Hour), Trusts: trusts}); err != nil {
			t.Fatal(err)
		}
	}
	nodeCert(first, a.Current().Pins())

	if _, err := a.Rotate(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Rotate(ctx, nil, nil); !errs.HasReason(err, errs.ReasonCAState) {
		t.Fatalf("a second rotation under way: %v", err)
	}
	b.Reload(ctx)
	if got := len(b.Current().Trusted); got != 2 {
		t.Fatalf("the other replica trusts %d CAs after the rotation, want 2", got)
	}
	if _, err := a.Activate(ctx, false); !errs.HasReason(err, errs.ReasonCAInUse) || !strings.Contains(err.Error(), "n1") {
		t.Fatalf("activate with n1 not renewed: %v", err)
	}
	nodeCert(first, a.Current().Pins()) // renewed: now it trusts the new CA
	if _, err := a.Activate(ctx, false); err != nil {
		t.Fatal(err)
	}
	if a.Current().Signer == first {
		t.Fatal("the new CA does not sign after activate")
	}
	if _, _, err := a.Retire(ctx, false); !errs.HasReason(err, errs.ReasonCAInUse) || !strings.Contains(err.Error(), "n1") {
		t.Fatalf("retire with n1's latest certificate from the old CA: %v", err)
	}
	if err := st.RecordCertIssue(ctx, catrust.CertIssue{Cred: "h1", Role: "node", Name: "n1", IssuerPin: pki.Pin(a.Current().Signer.Cert),
		Issued: time.Now().Add(time.Second), Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Retire(ctx, false); err != nil {
		t.Fatal(err)
	}
	b.Reload(ctx)
	set := b.Current()
	if len(set.Trusted) != 1 || set.Signer == nil || !set.Signs() {
		t.Fatalf("after retire the other replica trusts %d CAs (signs %v)", len(set.Trusted), set.Signs())
	}
	if got := set.RetiredIssuer(first.Cert); !strings.Contains(got, pki.Pin(first.Cert)) {
		t.Fatalf("the retired CA is named %q", got)
	}
}
