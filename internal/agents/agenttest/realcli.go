package agenttest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// Want matches one item a real CLI must have sent the model.
type Want struct {
	Role, Kind string
	Text       string // substring of the text (or tool output)
	Tool, ID   string // tool name and call id, for tool items ("": any)
}

func (w Want) matches(it fakemodel.Item) bool {
	return it.Role == w.Role && it.Kind == w.Kind && strings.Contains(it.Text, w.Text) &&
		(w.Tool == "" || it.ToolName == w.Tool) && (w.ID == "" || it.ToolCallID == w.ID)
}

// AssertInOrder fails t unless every want appears in items, in this order
// (a CLI adds its own system prompt and context around the history).
func AssertInOrder(t testing.TB, items []fakemodel.Item, wants []Want) {
	t.Helper()
	i := 0
	for _, w := range wants {
		for i < len(items) && !w.matches(items[i]) {
			i++
		}
		if i == len(items) {
			var b strings.Builder
			for _, it := range items {
				b.WriteString("  " + it.String() + "\n")
			}
			t.Fatalf("the model never received %+v in order; it got:\n%s", w, b.String())
		}
		i++
	}
}

var marker = regexp.MustCompile(`MARKER-[A-Z0-9]+`)

// Probe is a short piece of s that must reach the model: the marker it
// carries, or else its first line (at most 30 bytes).
func Probe(s string) string {
	if m := marker.FindString(s); m != "" {
		return m
	}
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(first) > 30 {
		first = first[:30]
	}
	return first
}

// WantsFor is what the model must receive for a neutral conversation a
// writer rendered: every user turn, assistant text and call/result pair,
// each call under the name the writer gives it (toolName).
func WantsFor(msgs []transcript.Message, toolName func(string) string) []Want {
	var ws []Want
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindUser:
			ws = append(ws, Want{Role: "user", Kind: "text", Text: Probe(m.Text)})
		case transcript.KindAssistant:
			ws = append(ws, Want{Role: "assistant", Kind: "text", Text: Probe(m.Text)})
		case transcript.KindToolCall:
			ws = append(ws, Want{Role: "assistant", Kind: "tool_call", Tool: toolName(m.ToolCall.Name), ID: m.ToolCall.ID})
		case transcript.KindToolResult:
			ws = append(ws, Want{Role: "tool", Kind: "tool_result", Text: Probe(m.ToolResult.Output), ID: m.ToolResult.CallID})
		}
	}
	return ws
}

// CheckOwnSession fails t unless a reader got all of a session the real
// CLI wrote itself: well formed, nothing skipped (everything the pinned
// CLI writes is known; a new version's records would show up here), and
// every one of wants in the session's summary, which it returns: one line
// a message, "user:TEXT", "assistant:TEXT", "call:NAMEINPUT" or
// "result:OUTPUT".
func CheckOwnSession(t *testing.T, msgs []transcript.Message, skipped map[string]int, wants ...string) string {
	t.Helper()
	CheckWellFormed(t, msgs)
	if len(skipped) > 0 {
		t.Errorf("the reader does not know parts of the pinned CLI's session: %v", skipped)
	}
	var got []string
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			got = append(got, "call:"+m.ToolCall.Name+m.ToolCall.Input)
		case transcript.KindToolResult:
			got = append(got, "result:"+m.ToolResult.Output)
		case transcript.KindUser, transcript.KindAssistant:
			got = append(got, m.Kind.String()+":"+m.Text)
		}
	}
	joined := strings.Join(got, "\n")
	AssertHoldsAll(t, "the reader", joined, wants...)
	return joined
}

// Texts joins the text of msgs, one a line.
func Texts(msgs []transcript.Message) string {
	texts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		texts = append(texts, m.Text)
	}
	return strings.Join(texts, "\n")
}

// Largest is the biggest of files (a CLI that leaves stray small files
// beside a session), failing t when there is none.
func Largest(t testing.TB, files []string) string {
	t.Helper()
	best, size := "", int64(-1)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			best, size = f, fi.Size()
		}
	}
	if best == "" {
		t.Fatal("no session file")
	}
	return best
}

// AssertNoneHolds fails t when an item the model got holds any of texts
// (a notice or an internal row that must never reach it).
func AssertNoneHolds(t testing.TB, items []fakemodel.Item, texts ...string) {
	t.Helper()
	for _, it := range items {
		for _, s := range texts {
			if strings.Contains(it.Text, s) {
				t.Fatalf("%q reached the model: %s", s, it)
			}
		}
	}
}

// AssertHoldsAll fails t for each of subs that s, what a reading got, does
// not hold.
func AssertHoldsAll(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lost %q; got:\n%s", what, sub, s)
		}
	}
}

// Cwd makes the folder elem names under home and returns it: the working
// directory a real CLI's session runs in.
func Cwd(t testing.TB, home string, elem ...string) string {
	t.Helper()
	dir := filepath.Join(append([]string{home}, elem...)...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
