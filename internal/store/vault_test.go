package store_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func openVault(t *testing.T) (*store.Vault, *clientv3.Client) {
	t.Helper()
	ep := testharness.StartEtcd(t, nil)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	st, err := store.New(context.Background(), cli, store.DefaultConfig(), metrics.NewStore(nil), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, secrets.KeySize)
	_, _ = rand.Read(key)
	box, _ := secrets.NewBox(key)
	return st.Vault(box, codecs.Credential), cli
}

func claudeCred(access, refresh string, expires time.Time) []byte {
	return fmt.Appendf(nil, `{"claudeAiOauth":{"accessToken":%q,"refreshToken":%q,"expiresAt":%d}}`, access, refresh, expires.UnixMilli())
}

// Concurrent puts of credentials issued at different times leave the
// newest, whatever order they land in; an older or equal one is refused
// with CREDENTIAL_NOT_NEWER and changes nothing.
func TestPutNeverGoesBackwards(t *testing.T) {
	v, _ := openVault(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := v.Add(ctx, "claude", "A", claudeCred(fmt.Sprintf("at-%d", i), fmt.Sprintf("rt-%d", i), base.Add(time.Duration(i)*time.Minute)))
			if err != nil && !custody.IsNotNewer(err) {
				t.Errorf("put %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	raw, tok, err := v.Get(ctx, "claude", "A")
	if err != nil {
		t.Fatal(err)
	}
	if want := claudeCred("at-19", "rt-19", base.Add(19*time.Minute)); string(raw) != string(want) || tok.AccessID != custody.Fingerprint("at-19") {
		t.Fatalf("stored %s, want the newest", raw)
	}
	for _, old := range [][]byte{claudeCred("at-3", "rt-3", base.Add(3*time.Minute)), claudeCred("at-x", "rt-x", base.Add(19*time.Minute))} {
		if _, err := v.Put(ctx, "claude", "A", old, "n"); !custody.IsNotNewer(err) || !errs.HasReason(err, custody.ReasonNotNewer) {
			t.Fatalf("older put: %v", err)
		}
	}
	acc, tok, err := v.AccessOnly(ctx, "claude", "A")
	if err != nil || tok.HasRefresh || string(acc) == string(raw) {
		t.Fatalf("access-only copy still has its refresh token: %s %v", acc, err)
	}
	if _, err := v.Put(ctx, "claude", "A", []byte(`{"claudeAiOauth":{}}`), "n"); !errs.HasReason(err, errs.ReasonInvalidArgument) {
		t.Fatalf("malformed credential: %v", err)
	}
	// A node's report never creates a login custody does not hold
	// (an account removed meanwhile), and a removed account is gone.
	must(t, v.Delete(ctx, "claude", "A"))
	if _, err := v.Put(ctx, "claude", "A", claudeCred("at-late", "rt-late", base.Add(time.Hour)), "n"); !errs.HasReason(err, custody.ReasonNotInCustody) {
		t.Fatalf("a report brought a removed login back: %v", err)
	}
	if _, _, err := v.Get(ctx, "claude", "A"); !errs.HasReason(err, custody.ReasonNotInCustody) {
		t.Fatalf("removed login still readable: %v", err)
	}
}

// The custodian record follows the node's lease; a refresh record from
// another node holds back the next custodian.
func TestElectAndRefreshRecord(t *testing.T) {
	v, cli := openVault(t)
	ctx := context.Background()
	l1, _ := cli.Grant(ctx, 60)
	l2, _ := cli.Grant(ctx, 60)
	if who, err := v.Elect(ctx, "codex", "A", "n1", fence.Lease(l1.ID)); err != nil || who != "n1" {
		t.Fatalf("elect n1: %q %v", who, err)
	}
	if who, _ := v.Elect(ctx, "codex", "A", "n2", fence.Lease(l2.ID)); who != "n1" {
		t.Fatalf("second node took custody: %q", who)
	}
	if err := v.BeginRefresh(ctx, "codex", "A", "n2", time.Now()); !errs.HasReason(err, custody.ReasonNotCustodian) {
		t.Fatalf("non-custodian began a refresh: %v", err)
	}
	if err := v.BeginRefresh(ctx, "codex", "A", "n1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, l1.ID); err != nil { // n1 is gone
		t.Fatal(err)
	}
	if who, _ := v.Elect(ctx, "codex", "A", "n2", fence.Lease(l2.ID)); who != "n2" {
		t.Fatalf("custody did not pass on: %q", who)
	}
	if err := v.BeginRefresh(ctx, "codex", "A", "n2", time.Now()); !errs.HasReason(err, errs.ReasonRefreshInDoubt) {
		t.Fatalf("refresh while n1's is in doubt: %v", err)
	}
	if err := v.EndRefresh(ctx, "codex", "A", "n1"); err != nil { // n1 back, reported
		t.Fatal(err)
	}
	if err := v.BeginRefresh(ctx, "codex", "A", "n2", time.Now()); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
