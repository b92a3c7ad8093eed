package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A migration's runner learns of a cancel asked on another replica from
// the store. It read the migration's header every 200ms for as long as
// the migration ran; it reads it once and watches it: changes other than
// a cancel are no new reads, and a cancel, a deleted header or the end of
// the wait's context ends it.
func TestWaitCancelRequestedWatches(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	waiter, reads, cli := countingStore(t, ep)
	writer := testharness.OpenStore(t, ep, nil)
	tests := []struct {
		name  string
		after func(ctx context.Context, id string, stop context.CancelFunc) error // while the wait runs
		want  func(error) bool
	}{
		{"cancel asked before the wait", nil, func(err error) bool { return err == nil }},
		{"cancel asked after other changes", func(ctx context.Context, id string, _ context.CancelFunc) error {
			for i := range 3 {
				if _, err := writer.UpdateMigration(ctx, id, func(m *castv1.Migration) error { m.Reason = fmt.Sprint("step ", i); return nil }); err != nil {
					return err
				}
			}
			_, err := writer.UpdateMigration(ctx, id, func(m *castv1.Migration) error { m.CancelRequested = true; return nil })
			return err
		}, func(err error) bool { return err == nil }},
		{"header deleted", func(ctx context.Context, id string, _ context.CancelFunc) error {
			_, err := cli.Delete(ctx, store.DefaultPrefix+"migrations/"+id)
			return err
		}, func(err error) bool { return errs.HasReason(err, errs.ReasonNotFound) }},
		{"context ended", func(_ context.Context, _ string, stop context.CancelFunc) error {
			stop()
			return nil
		}, func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxT(t)
			id := fmt.Sprintf("mig-w%d", i)
			if _, _, err := writer.CreateMigration(ctx, &castv1.Migration{Id: id, TargetNode: "n2", CancelRequested: tt.after == nil,
				Sessions: []*castv1.MigrationSession{{SessionId: fmt.Sprintf("s%d", i), SourceNode: "n1"}}}, ""); err != nil {
				t.Fatal(err)
			}
			reads.Store(0)
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- waiter.WaitCancelRequested(wctx, id) }()
			if tt.after != nil {
				if err := tt.after(ctx, id, stop); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; !tt.want(err) {
				t.Errorf("WaitCancelRequested = %v", err)
			}
			if n := reads.Load(); n != 1 {
				t.Errorf("the wait sent %d reads, want 1 (then a watch)", n)
			}
		})
	}
}
