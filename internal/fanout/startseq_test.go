package fanout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fanout"
)

// A watch from a seq past the session's end (a typo in `cast watch
// --from`, a client holding another session's seq) was taken: the
// messages between the end and that seq, appended later, were skipped
// without a word as "in the catch-up read", and nothing reached the
// watcher until that seq. It is refused now, before anything is sent,
// saying where the session ends; from the end plus one is still a watch
// of what comes next.
func TestWatchFromPastTheEndIsRefused(t *testing.T) {
	e := newEnv(t, fanout.DefaultConfig(), nil)
	sid := e.session(t)
	e.appendN(t, 2, 8, sid)

	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second) // bounds the old code's endless wait
	defer cancel()
	sent := 0
	err := e.hub.Watch(ctx, "user:alice", sid, 10, func(fanout.Event) error { sent++; return nil })
	if !errs.HasReason(err, errs.ReasonInvalidArgument) || sent != 0 {
		t.Fatalf("Watch from seq 10 of a 2-message session = %v after %d events; want INVALID_ARGUMENT before any event", err, sent)
	}
	if want := "start_seq 10 is past the session's end (its last seq is 2)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}

	// From the end plus one: the next message, and nothing else.
	c := e.watch(ctxT(t), "user:alice", sid, 3, 3, nil)
	<-c.first
	e.appendN(t, 1, 8, sid)
	c.check(t, ctxT(t), "watch from the end plus one", 3)
}
