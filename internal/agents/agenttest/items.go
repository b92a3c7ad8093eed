package agenttest

import (
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// AssertItemsInOrder fails t unless every one of want (an item as
// fakemodel.Item.String gives it) is among got, in this order (a CLI adds
// its own system prompt and context around the history), and errs for
// each item that holds any of never (a row the model must not see).
func AssertItemsInOrder(t testing.TB, got []fakemodel.Item, want []string, never ...string) {
	t.Helper()
	var all []string
	j := 0
	for _, it := range got {
		s := it.String()
		all = append(all, s)
		if j < len(want) && s == want[j] {
			j++
		}
	}
	if j < len(want) {
		t.Fatalf("model did not receive %q (item %d of %d) in order; it received:\n%s", want[j], j+1, len(want), strings.Join(all, "\n"))
	}
	for _, s := range all {
		for _, n := range never {
			if strings.Contains(s, n) {
				t.Errorf("model received a row it must not: %s", s)
			}
		}
	}
}

// ItemStrings is what the model must receive, item by item, for msgs a
// CLI wrote itself and cast carried over whole: each user and assistant
// text, each result and, with calls, each call with its input.
func ItemStrings(msgs []transcript.Message, calls bool) []string {
	var want []string
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindUser:
			want = append(want, fakemodel.Item{Role: "user", Kind: fakemodel.KindText, Text: m.Text}.String())
		case transcript.KindAssistant:
			want = append(want, fakemodel.Item{Role: "assistant", Kind: fakemodel.KindText, Text: m.Text}.String())
		case transcript.KindToolCall:
			if calls {
				want = append(want, fakemodel.Item{Role: "assistant", Kind: fakemodel.KindToolCall, ToolName: m.ToolCall.Name, ToolCallID: m.ToolCall.ID, ToolInput: m.ToolCall.Input}.String())
			}
		case transcript.KindToolResult:
			want = append(want, fakemodel.Item{Role: "tool", Kind: fakemodel.KindToolResult, ToolCallID: m.ToolResult.CallID, Text: m.ToolResult.Output}.String())
		}
	}
	return want
}

// Stamp numbers msgs from 1 and times them a second apart from at, as
// the server's copy of a conversation has them.
func Stamp(msgs []transcript.Message, at time.Time) []transcript.Message {
	for i := range msgs {
		msgs[i].Seq = int64(i + 1)
		msgs[i].Time = at.Add(time.Duration(i) * time.Second)
	}
	return msgs
}
