package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Gemini CLI compresses its history mid-turn (the model reports a prompt
// past half its window): it writes its session anew as a summary of the
// older turns and the newest entries it keeps verbatim (the turn's prompt
// and tool call). The summary is stored once, as the compaction summary
// notice, and a switch to Claude Code after it rebuilds from the summary
// on: Claude's request holds the summary, the kept prompt and every
// message after it once, and none of the turns the summary stands for;
// and so does Gemini's after the switch back.
func TestGeminiCompressionThenSwitch(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "gemini", "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-GMC-%d", n) }
	// Two long answers, so that the older turns are worth compressing.
	long := func(n int) fakemodel.Reply {
		var b strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&b, "%d times %d is %d, LONG. ", n, i, n*i)
		}
		return fakemodel.Reply{Text: b.String()}
	}
	r.fake.Enqueue(long(1))
	id := r.create("gemini", dmsg(m(1)))
	r.fake.Enqueue(long(2))
	seq := r.send(id, dmsg(m(2)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	summaries := r.compactOn(id, dmsg(m(3)), fakemodel.Reply{Shell: "echo compressing", InputTokens: 800_000})
	if len(summaries) != 1 {
		t.Fatalf("%d compaction summaries stored, want 1; messages: %s", len(summaries), kinds(r.messages(id)))
	}
	// The fake's summary quotes Gemini's request for it, not the turns.
	summary, _, _ := strings.Cut(summaries[0], "\n")
	if strings.Contains(summary, m(1)) || strings.Contains(summary, m(2)) {
		t.Fatalf("the fake's summary holds the marks: %q", summary)
	}
	for k, agent := range []string{"claude", "gemini"} {
		r.switchTo(id, agent)
		seq = r.send(id, dmsg(m(4+k)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
		req := requestWith(t, r.fake, m(4+k))
		var marks []string
		for n := 3; n <= 4+k; n++ {
			marks = append(marks, m(n))
		}
		assertDeliveredOnce(t, req, marks...)
		var user strings.Builder
		for _, it := range req.Items {
			if it.Role == "user" && it.Kind == fakemodel.KindText {
				user.WriteString(it.Text + "\n")
			}
		}
		for _, gone := range []string{m(1), m(2)} {
			if strings.Contains(user.String(), gone) {
				t.Fatalf("%s request after the switch holds %s, which the summary stands for", agent, gone)
			}
		}
		if !strings.Contains(user.String(), strings.TrimSpace(summary)) {
			t.Fatalf("%s request after the switch does not hold the summary %q", agent, summary)
		}
	}
}
