package crossagent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// The compacted conversation: two old turns, the summary an agent's
// compaction left in their place, and a turn after it.
const (
	compactOld    = "MARKER-COLD"
	compactSum    = "MARKER-CSUM the user asked about the build twice; it passes"
	compactU3     = "MARKER-C3 and the tests?"
	compactA3     = "MARKER-CA3 they pass too"
	compactPrompt = "MARKER-CNEW what do you remember?"
)

// compactOldTurns are the turns before the compaction, as the neutral copy
// keeps them.
func compactOldTurns() []transcript.Message {
	return []transcript.Message{
		{Kind: transcript.KindUser, Text: compactOld + "-U1 does the build pass?"},
		{Kind: transcript.KindAssistant, Text: compactOld + "-A1 yes", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindUser, Text: compactOld + "-U2 sure?"},
		{Kind: transcript.KindAssistant, Text: compactOld + "-A2 quite sure", Model: "claude-sonnet-4-5"},
	}
}

func compactedConversation() []transcript.Message {
	msgs := append(compactOldTurns(),
		transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: compactSum},
		transcript.Message{Kind: transcript.KindUser, Text: compactU3},
		transcript.Message{Kind: transcript.KindAssistant, Text: compactA3, Model: "claude-sonnet-4-5"})
	return stamp(msgs, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
}

func stamp(msgs []transcript.Message, at time.Time) []transcript.Message {
	for i := range msgs {
		msgs[i].Agent = "claude"
		msgs[i].Seq = int64(i + 1)
		msgs[i].Time = at.Add(time.Duration(i) * time.Second)
	}
	return msgs
}

// TestMatrixCompacted: a compaction one agent made is honoured by the
// next. The source agent's native file carries the summary and the turn
// after it (read back as `cast import` would); the target is rebuilt from
// the neutral copy, which still holds the turns before the compaction, and
// the real target CLI sends the model the summary and what follows, never
// the old turns.
func TestMatrixCompacted(t *testing.T) {
	matrix(t, ring(compactShift), func(t *testing.T, agent string) []transcript.Message {
		return importVia(t, agent, "compact", compactedConversation())
	}, func(t *testing.T, src, tgt string, msgs []transcript.Message) {
		neutral := append(compactOldTurns(), msgs...)
		if err := receivedCompacted(writeAndResume(t, src, tgt, neutral, compactPrompt, nil)); err != nil {
			t.Fatalf("%s->%s: %v", src, tgt, err)
		}
	})
}

// receivedCompacted checks the request holds the summary, the turn after
// it and the new prompt in order, and nothing of the turns before it.
func receivedCompacted(items []fakemodel.Item) error {
	has := func(role, s string) func(fakemodel.Item) bool {
		return func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && (role == "" || it.Role == role) && strings.Contains(it.Text, s)
		}
	}
	steps := []step{
		{"the compaction summary", has("", "MARKER-CSUM")},
		{"the turn after it", has("user", "MARKER-C3")},
		{"its answer", has("assistant", "MARKER-CA3")},
		{"the new prompt", has("user", "MARKER-CNEW")},
	}
	if n, _ := inOrder(items, steps); n < len(steps) {
		return fmt.Errorf("the model did not receive %s in order; it got:\n%s", steps[n].what, dump(items))
	}
	for _, it := range items {
		if strings.Contains(it.Text, compactOld) {
			return fmt.Errorf("the model received a turn from before the compaction: %s", it.String())
		}
	}
	return nil
}
