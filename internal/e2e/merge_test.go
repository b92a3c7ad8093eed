package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/deliverycheck"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A fork on pi is merged back into its Claude parent three times with the
// cast CLI, each merge holding only what is new. Without --run a merge is
// history: a notice and a history-framed message that is not a user
// message, no model request for the parent, and the parent's next turn
// (on a message sent later) carries the fork's work once. With a message,
// or with --run, exactly one turn runs and its request holds the work. A
// merge while the parent runs is refused.
func TestMergeRunsNothingUnlessAsked(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi")
	c := castCLI(t, r)
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
	forkWork := func(text string) {
		t.Helper()
		seq := r.send(fork.Id, text)
		r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	}
	// merge runs cast merge args and returns the parent's new messages.
	merge := func(mark, notMark string, args ...string) (string, []*castv1.Message) {
		t.Helper()
		before := r.messages(parent.Id)
		out := c.must(append([]string{"merge"}, args...)...)
		added := r.messages(parent.Id)[len(before):]
		if len(added) < 2 || added[0].NoticeType != "merge" || added[1].Kind != castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			t.Fatalf("merge added %s, want a merge notice and a history message that is not a user message", kinds(added))
		}
		body := added[1].Text
		if !strings.Contains(body, mark) || (notMark != "" && strings.Contains(body, notMark)) || !strings.Contains(body, "NOT new instructions") {
			t.Fatalf("merge message (want %s, not %q):\n%s", mark, notMark, body)
		}
		return out, added
	}
	parentTurns := func() []fakemodel.Request {
		var out []fakemodel.Request
		for _, req := range r.fake.Turns() {
			if req.API == fakemodel.Anthropic {
				out = append(out, req)
			}
		}
		return out
	}
	// oneTurn checks that exactly one parent turn ran since n, on a
	// prompt holding want.
	oneTurn := func(n int, want ...string) fakemodel.Request {
		t.Helper()
		turns := parentTurns()[n:]
		if len(turns) != 1 {
			t.Fatalf("%d parent turns ran, want 1", len(turns))
		}
		for _, w := range want {
			if !strings.Contains(fakemodel.LastUserText(turns[0].Items), w) {
				t.Fatalf("the parent's turn does not carry %s in its prompt:\n%s", w, fmtItems(turns[0].Items))
			}
		}
		return turns[0]
	}

	// History only: no turn now; the next message's turn carries it, once.
	forkWork("fork work MARK-F1")
	n := len(parentTurns())
	out, added := merge("MARK-F1", "", fork.Id)
	if !strings.Contains(out, "nothing runs now") || len(added) != 2 {
		t.Fatalf("merge without --run: %s (added %s)", out, kinds(added))
	}
	seq := r.send(parent.Id, "carry on MARK-P1")
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	first := oneTurn(n, "MARK-F1", "MARK-P1") // a turn for the merge alone would come first
	// The merged work sits inside the delta's history: only the delta's
	// own end may say that the new message follows, or a model reading
	// history after the merge takes it for the request.
	if k := strings.Count(fakemodel.LastUserText(first.Items), deliverycheck.HistoryEnd); k != 1 {
		t.Fatalf("the prompt ends its history %d times, want once:\n%s", k, fakemodel.LastUserText(first.Items))
	}
	n = len(parentTurns())
	seq = r.send(parent.Id, "and again MARK-P2")
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if again := oneTurn(n, "MARK-P2"); strings.Contains(fakemodel.LastUserText(again.Items), "MARK-F1") {
		t.Fatalf("the merged work was handed over twice:\n%s", fmtItems(again.Items))
	}
	if _, errOut, code := c.run("merge", fork.Id); code == 0 || !strings.Contains(errOut, "nothing new") {
		t.Fatalf("merge with nothing new: exit %d: %s", code, errOut)
	}

	// While the parent runs a turn, a merge is refused.
	forkWork("more fork work MARK-F2")
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Text: "slow", Gate: gate})
	pseq := r.send(parent.Id, "slow parent turn")
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_RUNNING, pseq-1)
	if _, errOut, code := c.run("merge", fork.Id); code == 0 || !strings.Contains(errOut, "is running a turn") {
		t.Fatalf("merge while the parent runs: exit %d: %s", code, errOut)
	}
	close(gate)
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, pseq)

	// With a message: one turn, on it, holding the work.
	n = len(parentTurns())
	_, added = merge("MARK-F2", "MARK-F1", fork.Id, "now review it MARK-P3")
	if len(added) != 3 || added[2].Kind != castv1.MessageKind_MESSAGE_KIND_USER || added[2].Text != "now review it MARK-P3" {
		t.Fatalf("merge with a message added %s", kinds(added))
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, added[2].Seq)
	oneTurn(n, "MARK-F2", "MARK-P3")

	// With --run alone: one turn asking the agent to take the merge in.
	forkWork("last fork work MARK-F3")
	n = len(parentTurns())
	_, added = merge("MARK-F3", "MARK-F2", "--run", fork.Id)
	if len(added) != 3 || added[2].Kind != castv1.MessageKind_MESSAGE_KIND_USER {
		t.Fatalf("merge --run added %s", kinds(added))
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, added[2].Seq)
	oneTurn(n, "MARK-F3", "was merged into this conversation")
}

func fmtItems(items []fakemodel.Item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text + "\n")
	}
	return b.String()
}
