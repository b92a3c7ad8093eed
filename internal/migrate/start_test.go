package migrate_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/migrate"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast migrate --all` selects every session once when the store compacts
// past its listing's revision midway: the start failed
// (INVALID_PAGE_TOKEN), so on a store too big to list within the retained
// history it never could. It goes on after the last session listed.
func TestSelectAllResumesAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep := testharness.StartEtcd(t, nil)
	st := testharness.OpenStore(t, ep, nil)
	if _, err := st.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ids := testharness.Sessions(t, st, "n1", 5)
	cs := testharness.NewCompactingStore(t, ep, st, 2)
	mg, err := migrate.New(ctx, cs, migrate.DefaultConfig(), nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	sel, err := mg.SelectSessions(ctx, migrate.StartRequest{All: true}, "n2")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ms := range sel {
		got = append(got, ms.SessionId)
	}
	if !cs.Compacted || !slices.Equal(got, ids) {
		t.Fatalf("compacted %v; selected %v; want each of %v once, in order", cs.Compacted, got, ids)
	}
}
