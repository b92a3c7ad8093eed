package crossagent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestCheckerCatchesLoss proves the matrix's check fails on what a broken
// writer would cause, without running any CLI.
func TestCheckerCatchesLoss(t *testing.T) {
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: prompt1},
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "c1", Name: "Bash", Input: `{"command":"` + shellCmd + `"}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c1", Output: shellOut + "\n"}},
		{Kind: transcript.KindAssistant, Text: "FAKE: tool said " + shellOut},
		{Kind: transcript.KindUser, Text: prompt2},
		{Kind: transcript.KindAssistant, Text: "FAKE-ANSWER #3: saw 5 items"},
	}
	wants := append(wantsFor(msgs), want{kind: fakemodel.KindText, role: "user", has: "MARKER-NEW"})
	good := []fakemodel.Item{
		{Role: "system", Kind: "text", Text: "you are an agent"},
		{Role: "user", Kind: "text", Text: "<environment_context>x</environment_context>"},
		{Role: "user", Kind: "text", Text: `"` + prompt1 + `"`}, // quoted, as opencode does
		{Role: "assistant", Kind: "tool_call", ToolName: "exec_command", ToolCallID: "x9", ToolInput: `{"cmd":"cd /w && ` + shellCmd + `"}`},
		{Role: "tool", Kind: "tool_result", ToolCallID: "x9", Text: "Output:\n" + shellOut},
		{Role: "assistant", Kind: "text", Text: "FAKE: tool said " + shellOut},
		{Role: "user", Kind: "text", Text: prompt2},
		{Role: "assistant", Kind: "text", Text: "FAKE-ANSWER #3: saw 5 items"},
		{Role: "user", Kind: "text", Text: newPrompt},
		{Role: "user", Kind: "text", Text: "<system-reminder>injected</system-reminder>"},
	}
	if err := received(good, wants, "MARKER-NEW"); err != nil {
		t.Fatalf("a whole conversation was rejected: %v", err)
	}
	without := func(i int) []fakemodel.Item {
		return append(append([]fakemodel.Item{}, good[:i]...), good[i+1:]...)
	}
	swap := func(i, j int) []fakemodel.Item {
		out := append([]fakemodel.Item{}, good...)
		out[i], out[j] = out[j], out[i]
		return out
	}
	with := func(i int, f func(*fakemodel.Item)) []fakemodel.Item {
		out := append([]fakemodel.Item{}, good...)
		f(&out[i])
		return out
	}
	bad := map[string][]fakemodel.Item{
		"first user turn lost":    without(2),
		"tool call lost":          without(3),
		"tool result lost":        without(4),
		"assistant text lost":     without(5),
		"second user turn lost":   without(6),
		"last answer lost":        without(7),
		"new prompt lost":         without(8),
		"turns out of order":      swap(2, 6),
		"result before its call":  swap(3, 4),
		"result answers no call":  with(4, func(it *fakemodel.Item) { it.ToolCallID = "other" }),
		"output replaced":         with(4, func(it *fakemodel.Item) { it.Text = "Command: " + shellCmd }),
		"command changed":         with(3, func(it *fakemodel.Item) { it.ToolInput = `{"cmd":"ls"}` }),
		"user text as assistant":  with(6, func(it *fakemodel.Item) { it.Role = "assistant" }),
		"new prompt not the last": append(append([]fakemodel.Item{}, good...), fakemodel.Item{Role: "user", Kind: "text", Text: "something else"}),
	}
	for name, items := range bad {
		err := received(items, wants, "MARKER-NEW")
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "the model") {
			t.Errorf("%s: unhelpful error %v", name, err)
		}
	}
}

// TestHardCheckerCatchesLoss proves the hard matrix's check fails on each
// defect it is there to catch, without running any CLI.
func TestHardCheckerCatchesLoss(t *testing.T) {
	huge := hugeOutput()
	good := []fakemodel.Item{
		{Role: "user", Kind: "text", Text: "<system-reminder>injected</system-reminder>"},
		{Role: "user", Kind: "text", Text: hardU1},
		{Role: "assistant", Kind: "text", Text: "MARKER-HA1 reading both"},
		{Role: "assistant", Kind: "tool_call", ToolName: "Bash", ToolCallID: "a", ToolInput: `{"command":"` + hardCmd1 + `"}`},
		{Role: "assistant", Kind: "tool_call", ToolName: "Bash", ToolCallID: "b", ToolInput: `{"command":"` + hardCmd2 + `"}`},
		{Role: "tool", Kind: "tool_result", ToolCallID: "a", Text: "Process exited with code 0\nOutput:\n" + huge},
		{Role: "tool", Kind: "tool_result", ToolCallID: "b", Text: hardShort},
		{Role: "assistant", Kind: "text", Text: "MARKER-HA2 the build passed"},
		{Role: "user", Kind: "text", Text: hardU2},
		{Role: "assistant", Kind: "text", Text: "MARKER-HA3 nothing else to do"},
		{Role: "user", Kind: "text", Text: hardPrompt},
	}
	if err := receivedHard(good); err != nil {
		t.Fatalf("a whole conversation was rejected: %v", err)
	}
	with := func(f func([]fakemodel.Item) []fakemodel.Item) []fakemodel.Item {
		return f(append([]fakemodel.Item{}, good...))
	}
	bad := map[string][]fakemodel.Item{
		"typed reminder dropped": with(func(it []fakemodel.Item) []fakemodel.Item {
			it[1].Text = "MARKER-H1 why does my log show  and <cast_notice type=\"x\">?"
			return it
		}),
		"middle of the output cut": with(func(it []fakemodel.Item) []fakemodel.Item {
			it[5].Text = huge[:10_000] + "\n[... clipped ...]\n" + huge[len(huge)-10_000:]
			return it
		}),
		"calls and results interleaved": with(func(it []fakemodel.Item) []fakemodel.Item {
			it[4], it[5] = it[5], it[4]
			return it
		}),
		"results swapped between calls": with(func(it []fakemodel.Item) []fakemodel.Item {
			it[5].ToolCallID, it[6].ToolCallID = "b", "a"
			return it
		}),
		"second turn lost": with(func(it []fakemodel.Item) []fakemodel.Item {
			return append(it[:8], it[9:]...)
		}),
	}
	for name, items := range bad {
		if err := receivedHard(items); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLongCheckerCatchesDisorder proves the long-turn check fails when the
// calls arrive grouped (every call, then every result), when one result
// is lost or when two steps swap, without running any CLI.
func TestLongCheckerCatchesDisorder(t *testing.T) {
	var calls, results []fakemodel.Item
	for i := 1; i <= longCalls; i++ {
		calls = append(calls, fakemodel.Item{Role: "assistant", Kind: "tool_call", ToolInput: `{"command":"` + fmt.Sprintf(longCmd, i) + `"}`})
		results = append(results, fakemodel.Item{Role: "tool", Kind: "tool_result", Text: fmt.Sprintf(longOut, i)})
	}
	head := []fakemodel.Item{{Role: "user", Kind: "text", Text: longU1}}
	tail := []fakemodel.Item{{Role: "assistant", Kind: "text", Text: longDone}, {Role: "user", Kind: "text", Text: longPrompt}}
	var good []fakemodel.Item
	good = append(good, head...)
	for i := range calls {
		good = append(good, calls[i], results[i])
	}
	good = append(good, tail...)
	if err := receivedLong(good); err != nil {
		t.Fatalf("a whole turn was rejected: %v", err)
	}
	grouped := append(append(append(append([]fakemodel.Item{}, head...), calls...), results...), tail...)
	lost := append(append([]fakemodel.Item{}, good[:500]...), good[501:]...)
	swapped := append([]fakemodel.Item{}, good...)
	swapped[700], swapped[702] = swapped[702], swapped[700]
	for name, items := range map[string][]fakemodel.Item{"grouped": grouped, "a result lost": lost, "two calls swapped": swapped} {
		if err := receivedLong(items); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSubagentCheckerCatchesLoss proves, without any CLI, that
// receivedSubagent rejects a main chain that lost or reordered a step and
// one the subagent's own run leaked into.
func TestSubagentCheckerCatchesLoss(t *testing.T) {
	good := []fakemodel.Item{
		{Role: "user", Kind: "text", Text: subPrompt},
		{Role: "assistant", Kind: "tool_call", ToolName: "Agent", ToolCallID: "s", ToolInput: `{"prompt":"` + subTask + `"}`},
		{Role: "tool", Kind: "tool_result", ToolCallID: "s", Text: subDone},
		{Role: "assistant", Kind: "text", Text: subAnswer},
		{Role: "user", Kind: "text", Text: subNewTurn},
	}
	if err := receivedSubagent(good); err != nil {
		t.Fatalf("a whole conversation was rejected: %v", err)
	}
	leak := func(it fakemodel.Item) []fakemodel.Item {
		return append(append(append([]fakemodel.Item{}, good[:2]...), it), good[2:]...)
	}
	for name, items := range map[string][]fakemodel.Item{
		"no spawning call":     {good[0], good[2], good[3], good[4]},
		"no subagent answer":   {good[0], good[1], good[3], good[4]},
		"answer before call":   {good[0], good[2], good[1], good[3], good[4]},
		"no closing text":      {good[0], good[1], good[2], good[4]},
		"the run's text leaks": leak(fakemodel.Item{Role: "user", Kind: "text", Text: subInner + "-OUT"}),
		"the run's call leaks": leak(fakemodel.Item{Role: "assistant", Kind: "tool_call", ToolName: "Bash", ToolInput: `{"command":"` + subInCmd + `"}`}),
	} {
		if err := receivedSubagent(items); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
