package transcript

import (
	"slices"
	"testing"
)

func TestSinceCompaction(t *testing.T) {
	u := func(s string) Message { return Message{Kind: KindUser, Text: s} }
	sum := func(s string) Message { return Message{Kind: KindNotice, NoticeType: NoticeCompactionSummary, Text: s} }
	a := func(s string) Message { return Message{Kind: KindAssistant, Text: s} }
	sw := Message{Kind: KindNotice, NoticeType: NoticeAgentSwitch, Text: "claude -> codex"}
	for _, tc := range []struct {
		name string
		in   []Message
		want []string
	}{
		{"none: everything", []Message{u("a"), u("b")}, []string{"a", "b"}},
		{"from the summary on", []Message{u("a"), a("x"), sum("S1"), u("b")}, []string{"S1", "b"}},
		{"the last of two", []Message{u("a"), a("x"), sum("S1"), u("b"), a("y"), sum("S2"), u("c")}, []string{"S2", "c"}},
		// A CLI that compacts as a turn begins writes its summary before
		// the prompt's record, but the store holds the prompt first (it
		// was stored when sent): the summary does not hold it.
		{"the prompts of the turn the summary began", []Message{u("a"), a("x"), u("p"), u("q"), sum("S1"), a("y")}, []string{"S1", "p", "q", "y"}},
		{"a prompt the summary holds is not added again", []Message{u("a"), a("x"), u("p"), sum("S1 kept: p")}, []string{"S1 kept: p"}},
		{"an empty summary is no boundary", []Message{u("a"), sum("  "), u("b")}, []string{"a", "  ", "b"}},
		{"another notice is no boundary", []Message{u("a"), sw, u("b")}, []string{"a", "claude -> codex", "b"}},
		{"a summary last", []Message{u("a"), a("x"), sum("S1")}, []string{"S1"}},
		{"empty", nil, nil},
	} {
		var got []string
		for _, m := range SinceCompaction(tc.in) {
			got = append(got, m.Text)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
