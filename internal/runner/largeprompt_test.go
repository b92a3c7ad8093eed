package runner_test

import (
	"context"
	"os"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// userTexts are the user items of the newest model request.
func userTexts(t *testing.T, fake *fakemodel.Server) []string {
	t.Helper()
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("no turn reached the model")
	}
	var out []string
	for _, it := range turns[len(turns)-1].Items {
		if it.Role == "user" {
			out = append(out, it.Text)
		}
	}
	return out
}

// sentWhole says whether a request after the first from gave the model a
// user item equal to s.
func sentWhole(fake *fakemodel.Server, from int, s string) bool {
	for _, req := range fake.Turns()[from:] {
		for _, it := range req.Items {
			if it.Role == "user" && it.Text == s {
				return true
			}
		}
	}
	return false
}

// holds says whether texts has an element equal to s.
func holds(texts []string, s string) bool {
	for _, x := range texts {
		if x == s {
			return true
		}
	}
	return false
}

// TestCodexLongPrompt: with the real Codex, a prompt over its 1,048,576
// character cap on one turn reaches the model whole, byte for byte, on a
// fresh session and on a resumed one; the turn after it resumes the
// session with every turn in it; the session reads back with the user's
// prompts once each (not cast's pointer turn); and a native fork with such
// a prompt is left to the node's rebuilt-history fallback (unsupported)
// before anything runs.
func TestCodexLongPrompt(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	r, turn := setup(t, cases[1], fake.URL)
	if turn.Agent != "codex" {
		t.Fatalf("cases[1] is %s", turn.Agent)
	}
	// Codex knows no window for the fake model and, when the last answer
	// reported a history over 90% of its fallback one (about 1 MB of
	// text), compacts it before the next turn, sending a summary instead
	// of the turns. The answers report a small count, as a model with a
	// big window would leave it: the turns then go as they are.
	small := func(text string) fakemodel.Reply { return fakemodel.Reply{Text: text, InputTokens: 1000} }
	fake.Enqueue(small("ANSWER-ONE"), small("ANSWER-TWO"), small("ANSWER-THREE"))
	big := "review this\n\n" + agenttest.FakeDiff("first", 2<<20)
	turn.Prompt = big
	res, got, _, err := run(t, r, turn)
	if err != nil || !res.PromptSeen || res.NativeID == "" {
		t.Fatalf("2 MB prompt on a fresh session: %+v %v", res, err)
	}
	if u := userTexts(t, fake); !holds(u, big) {
		t.Fatalf("the model did not get the %d-byte prompt whole: user items of %v bytes", len(big), lens(u))
	}
	for _, e := range got {
		if e.msg.Kind == transcript.KindUser {
			t.Fatalf("emitted %s %.200s", e.msg.Kind, e.msg.Text)
		}
	}
	if len(got) == 0 || got[len(got)-1].msg.Kind != transcript.KindAssistant {
		t.Fatalf("no answer emitted: %v", kinds(got))
	}

	next := turn
	next.NativeID, next.NativePath, next.Prompt = res.NativeID, res.NativePath, "and now MARK-NEXT"
	res2, _, _, err := run(t, r, next)
	if err != nil || res2.NativeID != res.NativeID || !res2.PromptSeen {
		t.Fatalf("resume after the long prompt: %+v %v", res2, err)
	}
	if u := userTexts(t, fake); !holds(u, big) || !holds(u, next.Prompt) {
		t.Fatalf("the resumed turn lacks a turn: user items of %v bytes", lens(u))
	}

	big2 := "and this\n\n" + agenttest.FakeDiff("second", 1<<20+100)
	again := next
	again.Prompt = big2
	turnsBefore := len(fake.Turns())
	res3, _, _, err := run(t, r, again)
	if err != nil || res3.NativeID != res.NativeID || !res3.PromptSeen {
		t.Fatalf("long prompt on a resumed session: %+v %v", res3, err)
	}
	// Codex itself compacts here: its estimate of the history (the last
	// answer's count plus the new message, a quarter of its characters)
	// is over its fallback window, so it asks the model for a summary,
	// sending the history whole, and answers from the summary.
	if !sentWhole(fake, turnsBefore, big2) {
		t.Fatalf("no request gave the model the second long prompt whole")
	}

	back, err := r.Native(context.Background(), again)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range back {
		if m.Kind == transcript.KindUser {
			users = append(users, m.Text)
		}
	}
	if len(users) != 3 || users[0] != big || users[1] != next.Prompt || users[2] != big2 {
		t.Fatalf("the session reads back with user messages of %v bytes", lens(users))
	}

	before := len(fake.Turns())
	fork := turn
	fork.ForkOf, fork.Prompt = res.NativeID, big2
	res4, err := r.Run(context.Background(), fork, func(transcript.Message) {})
	if res4.Reason != runner.ReasonUnsupported || res4.PID != 0 || err == nil {
		t.Fatalf("native fork with a long prompt: %+v %v", res4, err)
	}
	if len(fake.Turns()) != before {
		t.Fatal("the refused fork reached the model")
	}
	if _, err := os.Stat(res.NativePath); err != nil {
		t.Fatal(err)
	}
}

func lens(texts []string) []int {
	var out []int
	for _, s := range texts {
		out = append(out, len(s))
	}
	return out
}
