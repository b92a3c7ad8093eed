package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A session parked on a usage limit runs nothing: its prompt waits for the
// next fleet credential or the next message. `cast interrupt` says there
// is nothing to stop (it sent the node an interrupt, "interrupt sent",
// which the node refused, it and the control plane each logging a
// warning), and the next message carries the parked prompt to the model
// once.
func TestInterruptOfAParkedSession(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-PRK-%d", n) }
	r.fake.FailNext(1, 429)
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", "a"), Node: "laptop", Text: dmsg(m(1))})
	if err != nil {
		t.Fatal(err)
	}
	parked := r.waitSession("parked on the usage limit", sess.Id, inState(castv1.SessionState_SESSION_STATE_PARKED))
	if out := r.cast.must("interrupt", sess.Id); !strings.Contains(out, "nothing to stop") {
		t.Fatalf("cast interrupt of a parked session: %q; want nothing to stop", out)
	}
	if parked.DeliveredSeq != 0 || parked.HeldSeq != 1 {
		t.Fatalf("parked session: delivered seq %d, held seq %d; want the prompt held (0 and 1)", parked.DeliveredSeq, parked.HeldSeq)
	}
	r.nextTurnHoldsOnce(sess.Id, m(2), m(1))
}
