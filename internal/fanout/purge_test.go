package fanout_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fanout"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A watch of a session that is purged ends with NOT_FOUND: nothing will
// come of it again. Watches used to wait on for good, each holding its
// stream and a place under its principal's cap (a purge deletes keys,
// and the feed skipped deletions).
func TestWatchOfAPurgedSessionEnds(t *testing.T) {
	e := newEnv(t, fanout.DefaultConfig(), nil)
	ctx := ctxT(t)
	sid := e.session(t)
	e.appendN(t, 2, 10, sid)
	w := e.watch(ctx, "p", sid, 1, 100, nil)
	<-w.first
	if err := e.st.PurgeSession(ctx, sid, func(*castv1.Session) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.err:
		if !errs.HasReason(err, errs.ReasonNotFound) {
			t.Fatalf("the watch of a purged session ended with %v, want NOT_FOUND", err)
		}
	case <-time.After(30 * time.Second): // a bound on the failure, not a pace
		t.Fatalf("the watch of a purged session still runs 30 s after the purge (%d messages)", w.count())
	}
	if n := e.hub.Stats().Watchers; n != 0 {
		t.Fatalf("%d watchers still registered", n)
	}
}
