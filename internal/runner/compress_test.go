package runner_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestGeminiCompressesMidTurn has the real Gemini CLI compress its
// history in the middle of a turn (the model reports a prompt past half
// its window): it writes the session anew as a summary of the older
// entries and the newest ones. The turn's tool call, result and answer
// are synced once, so is the summary (holding the prompt Gemini kept
// verbatim after it), and the session is not taken for one that lost its
// history (it was rebuilt before the next turn, with all of the history
// again, which Gemini compressed again).
func TestGeminiCompressesMidTurn(t *testing.T) {
	fake := fakemodel.Start(t)
	r, turn := setup(t, agentCase{agent: "gemini", args: []string{"--yolo"}}, fake.URL)
	// Two long turns, so that the older part of the history is worth
	// compressing, and Gemini's summary and its own answer to it stand
	// for more entries than they are.
	for n := range 2 {
		var long strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&long, "%d times %d is %d, MARKER-LONG. ", n, i, n*i)
		}
		fake.Enqueue(fakemodel.Reply{Text: long.String()})
		turn.Prompt = fmt.Sprintf("turn %d MARKER-EARLIER", n)
		res, _, _, err := run(t, r, turn)
		if err != nil || res.NativeID == "" || res.NativeLost {
			t.Fatalf("turn %d: %+v %v", n, res, err)
		}
		turn.NativeID, turn.NativePath = res.NativeID, res.NativePath
	}
	fake.Enqueue(fakemodel.Reply{Shell: "echo MARKER-SHELL", InputTokens: 800_000})
	turn.Prompt = "please TOOLCALL now MARKER-TWO"
	res, got, _, err := run(t, r, turn)
	if err != nil {
		t.Fatalf("the compressing turn: %+v %v", res, err)
	}
	// Gemini did compress: its session is its summary and what it kept.
	msgs, err := r.Native(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	summaries := 0
	for _, m := range msgs {
		if m.Kind == transcript.KindNotice && m.NoticeType == transcript.NoticeCompactionSummary {
			summaries++
		}
		if strings.Contains(m.Text, "MARKER-EARLIER") && m.Kind == transcript.KindUser {
			t.Fatalf("the session still holds %q: no compression", m.Text)
		}
	}
	if summaries != 1 {
		t.Fatalf("%d compaction summaries in the session, want 1", summaries)
	}
	// The summary is emitted once, before the answer. Gemini kept the
	// turn's prompt after it: read before the summary, the prompt is
	// accounted and the summary holds it; else the summary is the turn's
	// first entry, right after the prompt the store holds (a rebuild puts
	// that after it: transcript.SinceCompaction).
	var rest []emitted
	var emittedSummaries []string
	for _, e := range got {
		if e.msg.Kind == transcript.KindNotice && e.msg.NoticeType == transcript.NoticeCompactionSummary {
			emittedSummaries = append(emittedSummaries, e.msg.Text)
			continue
		}
		rest = append(rest, e)
	}
	if len(emittedSummaries) != 1 {
		t.Fatalf("emitted summaries %q, want one", emittedSummaries)
	}
	if first := got[0].msg; !strings.Contains(emittedSummaries[0], turn.Prompt) && first.NoticeType != transcript.NoticeCompactionSummary {
		t.Fatalf("the summary neither holds the kept prompt nor comes first: %v", kinds(got))
	}
	if got[len(got)-1].msg.Kind != transcript.KindAssistant {
		t.Fatalf("the turn's answer is not emitted last: %v", kinds(got))
	}
	want := []transcript.Kind{transcript.KindToolCall, transcript.KindToolResult, transcript.KindAssistant}
	if k := kinds(rest); !equalKinds(k, want) {
		t.Fatalf("emitted %v, want %v and the summary", k, want)
	}
	if res.NativeLost || !res.PromptSeen {
		t.Fatalf("native lost %v, prompt seen %v; want false, true", res.NativeLost, res.PromptSeen)
	}
}
