package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
)

// A node killed with -9 after a turn's CLI finished and its rows were
// stored, before the turn's outcome was recorded, runs the prompt again
// after its restart on a rebuilt native session: the real Claude's own
// session, which an earlier turn recorded, already holds the prompt and
// its answer, so resuming it would send the prompt twice in one request.
// Every model request holds each message at most once, and the next
// message's request holds every earlier one exactly once.
func TestNodeKilledBeforeATurnsOutcomeSendsItsPromptOnce(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude")
	ctx := context.Background()
	// dmsg: the fake's answers, which quote the start of a message, never
	// hold its mark, so a mark counted in a request is the message.
	marks := []string{"CRASH-FIRST", "CRASH-SECOND", "CRASH-THIRD"}
	s, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", "w"), Node: "laptop", Text: dmsg(marks[0])})
	if err != nil {
		t.Fatal(err)
	}
	idleAt := func(what string, seq int64) {
		t.Helper()
		r.waitSession(what, s.Id, func(s *castv1.Session) bool {
			return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= seq
		})
	}
	idleAt("the first turn done", 1)
	// The same node again, now with the failpoint: the second turn's end
	// kills it.
	r.nodes["laptop"].Kill()
	r.startNode("laptop", []string{"CAST_FAILPOINTS=" + node.FailpointTurnBeforeOutcome})
	sent, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: s.Id, Text: dmsg(marks[1])})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.nodes["laptop"].Wait(90 * time.Second); !ok {
		t.Fatalf("the node never reached failpoint %s", node.FailpointTurnBeforeOutcome)
	}
	r.startNode("laptop", nil)
	idleAt("the second message delivered after the restart", sent.Message.Seq)
	third, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: s.Id, Text: dmsg(marks[2])})
	if err != nil {
		t.Fatal(err)
	}
	idleAt("the third message answered", third.Message.Seq)
	reqs := r.fake.Turns()
	for i, req := range reqs {
		last := i == len(reqs)-1
		for _, mark := range marks {
			n := 0
			for _, it := range req.Items {
				if it.Role == "user" {
					n += strings.Count(it.Text, mark)
				}
			}
			if n > 1 || (last && n != 1) {
				var b strings.Builder
				for _, it := range req.Items {
					b.WriteString("  " + it.String() + "\n")
				}
				t.Fatalf("model request %d of %d holds %s %d times (want at most once, and once in the last):\n%s", i+1, len(reqs), mark, n, clipItems(b.String()))
			}
		}
	}
}
