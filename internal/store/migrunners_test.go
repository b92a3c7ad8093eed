package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A migration has one runner at a time: the lease that claimed it (again
// and again: a retried claim), until it releases it or its lease lapses
// (the replica died); then another replica's claim wins.
func TestMigrationRunnerClaims(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	aCtx, killA := context.WithCancel(ctx)
	a, aLost, err := s.RunnerLease(aCtx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.RunnerLease(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(step int, l store.Lease) bool {
		t.Helper()
		ok, err := s.ClaimMigration(ctx, "m1", l)
		if err != nil {
			t.Fatalf("claim %d: %v", step, err)
		}
		return ok
	}
	if !claim(1, a) || !claim(2, a) {
		t.Fatal("a could not claim m1, or not claim it again")
	}
	if claim(3, b) {
		t.Fatal("b claimed m1 while a held it")
	}
	if err := s.ReleaseMigration(ctx, "m1", b); err != nil || claim(4, b) {
		t.Fatalf("b's release of a's claim took effect (%v)", err)
	}
	if err := s.ReleaseMigration(ctx, "m1", a); err != nil || !claim(5, b) {
		t.Fatalf("b could not claim m1 once a released it (%v)", err)
	}
	if err := s.ReleaseMigration(ctx, "m1", b); err != nil || !claim(6, a) {
		t.Fatalf("a could not claim m1 again (%v)", err)
	}
	// a dies: its keepalive stops, the lease lapses, b takes m1 over.
	killA()
	<-aLost
	testharness.WaitFor(t, 10*time.Second, "b's claim after a's lease lapsed", func() bool { return claim(7, b) })
}
