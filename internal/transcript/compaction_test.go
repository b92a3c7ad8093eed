package transcript

import (
	"slices"
	"testing"
	"time"
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
	// The prompt that follows the summary is timed no earlier than it (a
	// writer ordering by time put it back before), in a copy.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := []Message{{Kind: KindAssistant, Text: "x", Time: t0}, {Kind: KindUser, Text: "p", Time: t0.Add(time.Second)},
		{Kind: KindNotice, NoticeType: NoticeCompactionSummary, Text: "S1", Time: t0.Add(2 * time.Second)}}
	out := SinceCompaction(in)
	if len(out) != 2 || out[1].Text != "p" || !out[1].Time.Equal(out[0].Time) || !in[1].Time.Equal(t0.Add(time.Second)) {
		t.Errorf("the prompt after the summary: %+v (the input's: %v)", out, in[1].Time)
	}
}
