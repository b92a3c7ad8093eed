package moves_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/testharness"
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

// A long answer in another script is clipped between characters wherever a
// move quotes it: cut by bytes inside a character, the worker's report to
// its parent could not be stored (the parent never heard), and a handoff
// whose brief fell back to the last answer made its session, then failed
// to store its prompt, at every retry.
func TestMovesQuoteLongNonASCIIAnswers(t *testing.T) {
	long := "x" + strings.Repeat("é", 2000) // 4001 bytes: both clips (2000, 3000) land inside a character
	t.Run("worker report", func(t *testing.T) {
		s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		parent, worker := parentAndWorker(ctx, t, s)
		if _, err := s.Append(ctx, worker.Session.Id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: long}}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
		if _, err := notifyIdle(ctx, s, worker.Session.Id); err != nil {
			t.Fatalf("report of a worker with a long answer: %v", err)
		}
		if p, err := s.GetSession(ctx, parent.Session.Id); err != nil || p.LastSeq != 1 {
			t.Fatalf("the parent holds %d messages (%v); want the worker's report", p.GetLastSeq(), err)
		}
	})
	t.Run("fallback brief", func(t *testing.T) {
		r := newMergeRig(t)
		r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, long)
		b := &briefs{n: 1} // the model is down: the brief quotes the last answer
		res, err := moves.Handoff(r.ctx, r.s, b, moves.HandoffRequest{SessionID: r.parent, ToAgent: "claude", RequestID: fence.RequestKey("test-user", ids.NewClientID())})
		if err != nil {
			t.Fatalf("handoff with a fallback brief of a long answer: %v", err)
		}
		if res.BriefSource != "fallback" || !utf8.ValidString(res.Prompt) {
			t.Fatalf("brief from %s, prompt valid UTF-8 %v; want the fallback, in UTF-8", res.BriefSource, utf8.ValidString(res.Prompt))
		}
	})
}

// A handoff of a session mid-turn, with the model for briefs down: the
// fallback brief quotes what the user asked after the last answer (the
// message the source is still running), or the new agent never hears the
// user's latest request. Older questions, answered, are not repeated.
func TestFallbackBriefQuotesWhatWasAskedSince(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs [][2]string // kind, text
		want []string
		not  []string
	}{
		{"mid-turn", [][2]string{{"user", "OLD-Q"}, {"assistant", "OLD-A"}, {"user", "RUNNING-Q"}}, []string{"OLD-A", "RUNNING-Q"}, []string{"OLD-Q"}},
		{"no answer yet", [][2]string{{"user", "FIRST-Q"}, {"user", "SECOND-Q"}}, []string{"FIRST-Q", "SECOND-Q"}, nil},
		{"answered", [][2]string{{"user", "Q"}, {"assistant", "LAST-A"}}, []string{"LAST-A"}, []string{"Asked since"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newMergeRig(t)
			for _, m := range tc.msgs {
				kind := castv1.MessageKind_MESSAGE_KIND_USER
				if m[0] == "assistant" {
					kind = castv1.MessageKind_MESSAGE_KIND_ASSISTANT
				}
				r.add(r.parent, kind, m[1])
			}
			res, err := moves.Handoff(r.ctx, r.s, &briefs{n: 1}, moves.HandoffRequest{SessionID: r.parent, ToAgent: "claude", DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.BriefSource != "fallback" {
				t.Fatalf("brief from %s, want the fallback", res.BriefSource)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Brief, w) {
					t.Errorf("fallback brief lacks %q:\n%s", w, res.Brief)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(res.Brief, n) {
					t.Errorf("fallback brief holds %q:\n%s", n, res.Brief)
				}
			}
		})
	}
}
