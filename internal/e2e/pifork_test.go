package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A pi fork taken while the parent's first message is still unanswered
// (its turn held at the model) is rebuilt from a history with no answer in
// it. pi, resuming such a file, writes all its entries again with the
// first answer; those are history, not new messages: the fork's first turn
// runs once, its neutral copy stores the inherited message and its own
// once each, and the next message's turn is the next new turn (seed 28 of
// the delivery model test ran the fork's first turn twice).
func TestPiForkOfUnansweredParentRunsOnce(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "pi")
	ctx := context.Background()
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Text: "parent answer", Gate: gate})
	parent, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Cwd: t.TempDir(), Text: "parent question MARK-PP1"})
	if err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 3*time.Minute, "the parent's turn held at the model", func() bool { return r.fake.TurnsStarted() >= 1 })

	fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: parent.Id, Agent: "pi"})
	if err != nil {
		t.Fatal(err)
	}
	seq := r.send(fork.Id, "fork question MARK-PF1")
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if path := forkPath(t, r.node.Output(), fork.Id); path != "rebuild" {
		t.Fatalf("a fork of a parent with no native session yet took the %q path", path)
	}
	close(gate)
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	// A second message: any rerun of the first turn comes before its turn.
	seq = r.send(fork.Id, "fork again MARK-PF2")
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	for _, mark := range []string{"MARK-PP1", "MARK-PF1", "MARK-PF2"} {
		n := 0
		for _, m := range r.messages(fork.Id) {
			if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(m.Text, mark) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the fork's neutral copy holds %d user messages with %s; want 1\n%s", n, mark, kinds(r.messages(fork.Id)))
		}
	}
	newTurns := map[string]int{}
	for _, req := range r.fake.Turns() {
		newTurns[lastUserMark(req.Items)]++
	}
	for _, mark := range []string{"MARK-PP1", "MARK-PF1", "MARK-PF2"} {
		if newTurns[mark] != 1 {
			t.Errorf("%s was the new turn of %d requests; want 1 (%v)", mark, newTurns[mark], newTurns)
		}
	}
}

// lastUserMark is the MARK- word of the request's last user text item
// (its new turn; "" when it has none).
func lastUserMark(items []fakemodel.Item) string {
	for i := len(items) - 1; i >= 0; i-- {
		if it := items[i]; it.Role == "user" && it.Kind == fakemodel.KindText {
			for _, w := range strings.Fields(it.Text) {
				if strings.HasPrefix(w, "MARK-") {
					return w
				}
			}
			return ""
		}
	}
	return ""
}
