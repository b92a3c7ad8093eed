package moves_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
)

// briefs answers with the model's brief once, then fails: a retried
// handoff's brief comes out different (the fallback), as a model's may.
type briefs struct{ n int }

func (b *briefs) Brief(context.Context, string) (string, error) {
	b.n++
	if b.n > 1 {
		return "", errors.New("the brief model is down")
	}
	return "What was done, and what is next.", nil
}

// A handoff retried with its request id (the first answer was lost) answers
// with what its first try stored: the new session's prompt, its brief and
// where the brief came from. The retry composed a brief of its own and
// answered with it, while the session held the first one's prompt.
func TestRetriedHandoffAnswersWithTheStoredPrompt(t *testing.T) {
	r := newMergeRig(t)
	b := &briefs{}
	req := moves.HandoffRequest{SessionID: r.parent, ToAgent: "claude", RequestID: fence.RequestKey("test-user", ids.NewClientID())}
	first, err := moves.Handoff(r.ctx, r.s, b, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := moves.Handoff(r.ctx, r.s, b, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Session.Id != first.Session.Id {
		t.Fatalf("retried handoff made %s, want %s", again.Session.Id, first.Session.Id)
	}
	if again.Prompt != first.Prompt || again.Brief != first.Brief || again.BriefSource != first.BriefSource {
		t.Errorf("retried handoff answered brief %q (%s), want the first answer's %q (%s)", again.Brief, again.BriefSource, first.Brief, first.BriefSource)
	}
	msgs, _, err := r.s.ListMessages(r.ctx, first.Session.Id, 1, 1, 1, "")
	if err != nil || len(msgs) != 1 || msgs[0].Text != again.Prompt {
		t.Fatalf("the new session's prompt is %v (%v), want the retry's answer %q", msgs, err, again.Prompt)
	}
}
