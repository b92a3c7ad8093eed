package crossagent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// The long turn: one user message, then longCalls shell calls made one
// after another, each answered before the next, all stamped with the same
// instant (a source whose parts carry no times of their own, or a CLI
// faster than its clock), then a closing text. Order must come from the
// transcript, never from a timestamp or an id that ties.
const (
	longCalls  = 1000
	longU1     = "MARKER-L1 read every step file"
	longCmd    = "cat step-%04d.txt"
	longOut    = "STEP-%04d-OUT"
	longDone   = "MARKER-LA all steps read"
	longPrompt = "MARKER-LNEW which step came last?"
)

func longConversation() []transcript.Message {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{{Kind: transcript.KindUser, Text: longU1, Time: at}}
	turn := at.Add(time.Second)
	for i := 1; i <= longCalls; i++ {
		id := fmt.Sprintf("toolu_LONG_%04d", i)
		msgs = append(msgs,
			transcript.Message{Kind: transcript.KindToolCall, Model: "claude-sonnet-4-5", Time: turn,
				ToolCall: &transcript.ToolCall{ID: id, Name: "Bash", Input: `{"command":"` + fmt.Sprintf(longCmd, i) + `"}`}},
			transcript.Message{Kind: transcript.KindToolResult, Time: turn,
				ToolResult: &transcript.ToolResult{CallID: id, Output: fmt.Sprintf(longOut, i), ExitCode: code(0)}})
	}
	msgs = append(msgs, transcript.Message{Kind: transcript.KindAssistant, Text: longDone, Model: "claude-sonnet-4-5", Time: turn})
	for i := range msgs {
		msgs[i].Agent = "claude"
		msgs[i].Seq = int64(i + 1)
	}
	return msgs
}

// TestMatrixLongTurn: the long turn, written in each source agent's native
// format and imported back, reaches the model whole and in order when each
// real target CLI resumes it: every call before its own result, every
// result before the next call, the closing text, the new prompt last.
func TestMatrixLongTurn(t *testing.T) {
	matrix(t, ring(longShift), func(t *testing.T, agent string) []transcript.Message {
		return importVia(t, agent, "long", longConversation())
	}, func(t *testing.T, src, tgt string, msgs []transcript.Message) {
		if err := receivedLong(writeAndResume(t, src, tgt, msgs, longPrompt, nil)); err != nil {
			t.Fatalf("%s->%s: %v", src, tgt, err)
		}
	})
}

// receivedLong checks the long turn reached the model whole and in order:
// it scans the request once, each step found after the one before.
func receivedLong(items []fakemodel.Item) error {
	steps := []step{{"the user message", func(it fakemodel.Item) bool {
		return it.Kind == fakemodel.KindText && it.Role == "user" && strings.Contains(it.Text, "MARKER-L1")
	}}}
	for i := 1; i <= longCalls; i++ {
		cmd, out := fmt.Sprintf(longCmd, i), fmt.Sprintf(longOut, i)
		steps = append(steps,
			step{"call " + cmd, func(it fakemodel.Item) bool {
				return it.Kind == fakemodel.KindToolCall && strings.Contains(it.ToolInput, cmd)
			}},
			step{"result " + out, func(it fakemodel.Item) bool {
				return it.Kind == fakemodel.KindToolResult && strings.Contains(it.Text, out)
			}})
	}
	steps = append(steps,
		step{"the closing text", func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && it.Role == "assistant" && strings.Contains(it.Text, "MARKER-LA")
		}},
		step{"the new prompt", func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && it.Role == "user" && strings.Contains(it.Text, "MARKER-LNEW")
		}})
	if n, at := inOrder(items, steps); n < len(steps) {
		return fmt.Errorf("the model did not receive %s in order (step %d of %d, after %d of %d items)", steps[n].what, n+1, len(steps), at, len(items))
	}
	return nil
}

// step is one thing a request must hold, after the step before it.
type step struct {
	what string
	ok   func(fakemodel.Item) bool
}

// inOrder scans items once for steps, each after the one before, and
// returns how many it found and where the scan stopped.
func inOrder(items []fakemodel.Item, steps []step) (found, at int) {
	for _, s := range steps {
		for ; at < len(items) && !s.ok(items[at]); at++ {
		}
		if at == len(items) {
			return found, at
		}
		found, at = found+1, at+1
	}
	return found, at
}
