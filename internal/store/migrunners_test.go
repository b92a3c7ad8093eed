package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A migration has one runner at a time: the lease that claimed it (again
// and again: a retried claim), until it releases it or its lease lapses
// (the replica died); then another replica's claim wins.
func TestMigrationRunnerClaims(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	if _, _, err := s.CreateMigration(ctx, &castv1.Migration{Id: "m1", TargetNode: "n2", State: castv1.MigrationState_MIGRATION_STATE_RUNNING}, ""); err != nil {
		t.Fatal(err)
	}
	if unrun := unrunIDs(t, s); len(unrun) != 1 || unrun[0] != "m1" {
		t.Fatalf("unrun migrations %v, want m1", unrun)
	}
	aCtx, killA := context.WithCancel(ctx)
	a, aLost, err := s.RunnerLease(aCtx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.RunnerLease(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(step int, l fence.Lease) bool {
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
	if unrun := unrunIDs(t, s); len(unrun) != 0 {
		t.Fatalf("m1 is run by a, yet listed unrun: %v", unrun)
	}
	// a dies: its keepalive stops, the lease lapses, b takes m1 over.
	killA()
	<-aLost
	testharness.WaitFor(t, 10*time.Second, "m1 unrun after a's lease lapsed", func() bool { return len(unrunIDs(t, s)) == 1 })
	if !claim(7, b) {
		t.Fatal("b could not take m1 over")
	}
}

func unrunIDs(t *testing.T, s *store.Store) []string {
	t.Helper()
	list, err := s.UnrunMigrations(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list {
		out = append(out, m.Id)
	}
	return out
}

// The migration listing is read from the store a page at a time, newest
// first, each migration with its sessions: a page never reads every
// migration ever stored (it used to: one read of all headers, then one per
// migration, paged in memory). A kept page is filled from the migrations
// after it, and the listing is the one its first page saw.
func TestQueryMigrationsPagesNewestFirst(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	create := func() string {
		t.Helper()
		id := "m" + strings.ToLower(ids.NewClientID()) // as migrate.Start names them
		m := &castv1.Migration{Id: id, TargetNode: "n2", Sessions: []*castv1.MigrationSession{
			{SessionId: "s-" + id + "-a"}, {SessionId: "s-" + id + "-b"}}}
		if _, _, err := s.CreateMigration(ctx, m, ""); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var newest []string
	for range 6 {
		newest = append([]string{create()}, newest...)
	}
	skip := newest[1]
	q := store.MigrationQuery{Size: 2, Scope: "migrations:test", Keep: func(m *castv1.Migration) bool { return m.Id != skip }}
	var got []string
	for page := 0; ; page++ {
		list, next, err := s.QueryMigrations(ctx, q)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(list) > q.Size {
			t.Fatalf("page %d holds %d migrations, more than its size %d", page, len(list), q.Size)
		}
		for _, m := range list {
			if len(m.Sessions) != 2 || m.Sessions[0].SessionId != "s-"+m.Id+"-a" || m.Sessions[1].SessionId != "s-"+m.Id+"-b" {
				t.Fatalf("migration %s listed with sessions %v", m.Id, m.Sessions)
			}
			got = append(got, m.Id)
		}
		if page == 0 {
			create() // after the first page: not in this listing
		}
		if next == "" {
			break
		}
		q.Token = next
	}
	want := slices.DeleteFunc(slices.Clone(newest), func(id string) bool { return id == skip })
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want newest first without %s: %v", got, skip, want)
	}
	q.Scope = "migrations:another"
	if _, _, err := s.QueryMigrations(ctx, q); err == nil {
		t.Fatal("a token from another query's scope was taken")
	}
}
