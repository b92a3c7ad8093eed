package store_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// An import stored while no node is connected has no owner; a create for
// no node is refused once one is connected (it must be placed on it), and
// the first node to connect adopts it, once: a second finds nothing.
func TestUnownedSessionIsAdoptedByTheFirstNode(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "grok", Cwd: "/tmp"})
	if err != nil {
		t.Fatalf("create with no node connected: %v", err)
	}
	if c.Session.Node != "" {
		t.Fatalf("stored on %q; want no owner", c.Session.Node)
	}
	purged, err := s.CreateSession(ctx, fence.CreateParams{Agent: "grok", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PurgeSession(ctx, purged.Session.Id, func(*castv1.Session) error { return nil }); err != nil {
		t.Fatal(err)
	}
	l, err := s.RegisterNode(ctx, &castv1.Node{Name: "first"}, "test", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, fence.CreateParams{Agent: "grok", Cwd: "/tmp"}); !errs.HasReason(err, errs.ReasonConflict) {
		t.Fatalf("create for no node with a node connected: %v; want CONFLICT (place it again)", err)
	}
	took, err := s.AdoptUnowned(ctx, "first")
	if err != nil || len(took) != 1 || took[0].Session.Id != c.Session.Id || took[0].Session.Node != "first" || took[0].Token == 0 {
		t.Fatalf("AdoptUnowned(first) = %+v, %v; want %s, owned by first", took, err, c.Session.Id)
	}
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "second"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if took, err := s.AdoptUnowned(ctx, "second"); err != nil || len(took) != 0 {
		t.Fatalf("AdoptUnowned(second) = %+v, %v; want nothing left", took, err)
	}
	owned, err := s.SessionsOwnedBy(ctx, "first")
	if err != nil || len(owned) != 1 || owned[0].Token != ownerToken(t, s, c.Session.Id) {
		t.Fatalf("first owns %+v, %v", owned, err)
	}
	if err := s.UnregisterNode(ctx, l); err != nil {
		t.Fatal(err)
	}
}

func ownerToken(t *testing.T, s *store.Store, id string) int64 {
	t.Helper()
	_, tok, err := s.Owner(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
