package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A fork on pi is merged back into its Claude parent twice: each merge is a
// notice plus one history-framed message holding only what is new, and the
// parent's agent is woken with it. A merge while the parent runs is refused.
func TestForkMergedBackTwice(t *testing.T) {
	r := newTurnRig(t, "claude", "pi")
	ctx := context.Background()
	parent, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start MARK-P0"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: parent.Id, Agent: "pi", Model: "fake/fake-model", RequestId: "f1"})
	if err != nil {
		t.Fatal(err)
	}
	mergeAndWake := func(mark, notMark string) {
		t.Helper()
		before := r.messages(parent.Id)
		resp, err := r.c.Sessions.MergeSession(ctx, &castv1.MergeSessionRequest{ForkId: fork.Id})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Included < 1 {
			t.Fatalf("merge included %d items", resp.Included)
		}
		after := r.messages(parent.Id)
		added := after[len(before):]
		if len(added) < 2 || added[0].NoticeType != "merge" || added[1].Kind != castv1.MessageKind_MESSAGE_KIND_USER {
			t.Fatalf("merge added %s", kinds(added))
		}
		body := added[1].Text
		if !strings.Contains(body, mark) || (notMark != "" && strings.Contains(body, notMark)) || !strings.Contains(body, "NOT new instructions") {
			t.Fatalf("merge message (want %s, not %q):\n%s", mark, notMark, body)
		}
		testharness.WaitFor(t, 2*time.Minute, "the parent woken by the merge", func() bool {
			for _, req := range r.fake.Turns() {
				if req.API == "anthropic" && strings.Contains(fmtItems(req.Items), mark) {
					return true
				}
			}
			return false
		})
		r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, added[1].Seq)
	}

	seq := r.send(fork.Id, "fork work MARK-F1")
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	mergeAndWake("MARK-F1", "")
	if _, err := r.c.Sessions.MergeSession(ctx, &castv1.MergeSessionRequest{ForkId: fork.Id}); client.ReasonOf(err) != "NOTHING_TO_MERGE" {
		t.Fatalf("merge with nothing new: %v", err)
	}
	seq = r.send(fork.Id, "more fork work MARK-F2")
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	// While the parent runs a turn, a merge is refused.
	r.fake.Enqueue(fakemodel.Reply{Text: "slow", Delay: 30 * time.Second})
	pseq := r.send(parent.Id, "slow parent turn")
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_RUNNING, pseq-1)
	if _, err := r.c.Sessions.MergeSession(ctx, &castv1.MergeSessionRequest{ForkId: fork.Id}); client.ReasonOf(err) != "PARENT_RUNNING" {
		t.Fatalf("merge while the parent runs: %v", err)
	}
	if _, err := r.c.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: parent.Id}); err != nil {
		t.Fatal(err)
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, pseq-1)
	mergeAndWake("MARK-F2", "MARK-F1")
}

func fmtItems(items []fakemodel.Item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text + "\n")
	}
	return b.String()
}
