package delivery

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

func TestTransitionTable(t *testing.T) {
	row := func(known int64) *Row { return &Row{NativeID: "n1", Node: "node-a", KnownUpto: known} }
	tests := []struct {
		name  string
		in    Input
		want  Kind
		id    string
		miss  Range
		count int
	}{
		// ARCHITECTURE §4, one row each.
		{name: "fresh: no native, no content", in: Input{CanReconstitute: true}, want: Fresh},
		{name: "fresh: cannot reconstitute either", in: Input{}, want: Fresh},
		{name: "reuse: seen everything", in: Input{Native: row(4), Content: []int64{1, 2, 3, 4}}, want: Reuse, id: "n1"},
		{name: "reuse: known beyond the content", in: Input{Native: row(9), Content: []int64{1, 2}}, want: Reuse, id: "n1"},
		{name: "reuse: native, no content yet", in: Input{Native: row(0)}, want: Reuse, id: "n1"},
		{name: "delta: missed two", in: Input{Native: row(2), Content: []int64{1, 2, 3, 4}, CanReconstitute: true},
			want: Delta, id: "n1", miss: Range{3, 4}, count: 2},
		{name: "delta: agent that cannot reconstitute still gets a delta", in: Input{Native: row(2), Content: []int64{1, 2, 5}},
			want: Delta, id: "n1", miss: Range{5, 5}, count: 1},
		{name: "rebuild: content, no native, reconstitutes", in: Input{Content: []int64{1, 2, 3}, CanReconstitute: true},
			want: Rebuild, miss: Range{1, 3}, count: 3},
		{name: "seed: content, no native, cannot reconstitute", in: Input{Content: []int64{2, 3}},
			want: Seed, miss: Range{2, 3}, count: 2},
		// Unrecorded or unreachable rows count as none.
		{name: "unrecorded row is none", in: Input{Native: &Row{KnownUpto: 5}, Content: []int64{1}, CanReconstitute: true},
			want: Rebuild, miss: Range{1, 1}, count: 1},
		{name: "row on another node is none", in: Input{Native: row(5), Content: []int64{1, 2}, CanReconstitute: true, Node: "node-b"},
			want: Rebuild, miss: Range{1, 2}, count: 2},
		{name: "row on this node", in: Input{Native: row(5), Content: []int64{1, 2}, Node: "node-a"}, want: Reuse, id: "n1"},
		{name: "unsorted content", in: Input{Native: row(1), Content: []int64{7, 1, 3}},
			want: Delta, id: "n1", miss: Range{3, 7}, count: 2},
		{name: "unassigned seqs ignored", in: Input{Content: []int64{0, -1}, CanReconstitute: true}, want: Fresh},
		// A message stored while the agent's turn ran, between its own rows:
		// below KnownUpto, yet never in its native session.
		{name: "delta: a missing row below known", in: Input{Native: row(9), Missing: []Range{{8, 8}},
			Content: []int64{1, 7, 8, 9}}, want: Delta, id: "n1", miss: Range{8, 8}, count: 1},
		{name: "reuse: missing rows that are not content", in: Input{Native: row(9), Missing: []Range{{8, 8}},
			Content: []int64{1, 7, 9}}, want: Reuse, id: "n1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Transition(tc.in)
			if d.Kind != tc.want || d.NativeID != tc.id || d.Missed != tc.miss || d.MissedCount != tc.count {
				t.Fatalf("got %+v (%s), want %s id=%q missed=%v count=%d", d, d.Kind, tc.want, tc.id, tc.miss, tc.count)
			}
			if d.Kind.Resumes() != (d.NativeID != "") {
				t.Fatalf("%s: Resumes()=%v with NativeID %q", d.Kind, d.Kind.Resumes(), d.NativeID)
			}
		})
	}
}

func TestTransitionNotices(t *testing.T) {
	notice := func(seq int64, typ string) transcript.Message {
		return transcript.Message{Seq: seq, Kind: transcript.KindNotice, NoticeType: typ, Text: typ}
	}
	base := []transcript.Message{
		{Seq: 1, Kind: transcript.KindUser, Text: "hi"},
		{Seq: 2, Kind: transcript.KindAssistant, Text: "hello", Agent: "claude"},
	}
	tests := []struct {
		name  string
		extra []transcript.Message
		row   *Row
		recon bool
		want  Kind
	}{
		{name: "agent switch divider only", extra: []transcript.Message{notice(3, transcript.NoticeAgentSwitch)}, row: &Row{NativeID: "n", KnownUpto: 2}, want: Reuse},
		{name: "handoff, merge, migration notices", extra: []transcript.Message{
			notice(3, transcript.NoticeHandoff), notice(4, transcript.NoticeMerge), notice(5, transcript.NoticeMigration),
			notice(6, transcript.NoticeAccountSwitch), notice(7, transcript.NoticeModelSwitch), notice(8, transcript.NoticeFork),
			notice(9, transcript.NoticeCompactionSummary)}, row: &Row{NativeID: "n", KnownUpto: 2}, want: Reuse},
		{name: "internal rows", extra: []transcript.Message{{Seq: 3, Kind: transcript.KindInternal, Text: "x"}}, row: &Row{NativeID: "n", KnownUpto: 2}, want: Reuse},
		{name: "notices alone are no earlier content", extra: nil, row: nil, recon: true, want: Fresh},
		{name: "notices then content: delta from the content", extra: []transcript.Message{
			notice(3, transcript.NoticeAgentSwitch), {Seq: 4, Kind: transcript.KindUser, Text: "q"}}, row: &Row{NativeID: "n", KnownUpto: 2}, want: Delta},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs := append(append([]transcript.Message{}, base...), tc.extra...)
			if tc.name == "notices alone are no earlier content" {
				msgs = []transcript.Message{notice(1, transcript.NoticeFork), notice(2, transcript.NoticeAgentSwitch)}
			}
			d := Transition(Input{Native: tc.row, Content: ContentSeqs(msgs), CanReconstitute: tc.recon})
			if d.Kind != tc.want {
				t.Fatalf("got %s, want %s", d.Kind, tc.want)
			}
			if d.Kind == Delta && d.Missed != (Range{4, 4}) {
				t.Fatalf("delta missed %v, want 4:4 (the notice at 3 is not content)", d.Missed)
			}
		})
	}
}

// session is a neutral transcript under construction with each agent's row
// kept by the bookkeeping rules, as the node does around a turn.
type session struct {
	msgs []transcript.Message
	rows map[string]Row
}

func (s *session) add(m transcript.Message) int64 {
	m.Seq = int64(len(s.msgs) + 1)
	s.msgs = append(s.msgs, m)
	return m.Seq
}

// turn appends the prompt, decides the transition from what came before,
// and (when accepted) appends the reply and does the bookkeeping. It
// returns the decision and the slice the turn would carry.
func (s *session) turn(t *testing.T, agent, prompt string, accepted bool, reply ...transcript.Message) (Decision, SliceResult) {
	t.Helper()
	a, ok := agents.Lookup(agent)
	if !ok {
		t.Fatalf("unknown agent %s", agent)
	}
	promptSeq := s.add(transcript.Message{Kind: transcript.KindUser, Text: prompt})
	before := s.msgs[:promptSeq-1]
	row := s.rows[agent]
	d := Transition(Input{Native: &row, Content: ContentSeqs(before), CanReconstitute: a.Caps.CanReconstitute})
	var sl SliceResult
	if d.Kind == Delta || d.Kind == Seed {
		sl = Slice(d.Missed.Messages(before), SliceOptions{SessionID: "ses-1", ContextWindow: a.ContextWindow})
	}
	if !accepted {
		s.rows[agent] = row.Refused()
		return d, sl
	}
	id := row.NativeID
	if !d.Kind.Resumes() {
		id = agent + "-native-" + string(rune('a'+len(s.msgs)))
	}
	row = row.Accepted(id, "node-a", "/p/"+id, promptSeq)
	for _, m := range reply {
		m.Agent = agent
		row = row.Stored(s.add(m))
	}
	s.rows[agent] = row
	return d, sl
}

func TestClaudeCodexClaudeDelta(t *testing.T) {
	s := &session{rows: map[string]Row{}}
	d, _ := s.turn(t, "claude", "write hello.go", true,
		transcript.Message{Kind: transcript.KindAssistant, Text: "CLAUDE-ANSWER-1"})
	if d.Kind != Fresh {
		t.Fatalf("first turn: %s", d.Kind)
	}
	s.add(transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "switched to codex"})
	d, _ = s.turn(t, "codex", "add a test", true,
		transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "c1", Name: "exec_command", Input: `{"cmd":"go test ./..."}`}},
		transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c1", Output: "ok", ExitCode: ptr(int32(0))}},
		transcript.Message{Kind: transcript.KindAssistant, Text: "CODEX-ANSWER"})
	if d.Kind != Rebuild || d.Missed != (Range{1, 2}) {
		t.Fatalf("codex turn: %+v", d)
	}
	s.add(transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "switched to claude"})
	d, sl := s.turn(t, "claude", "now review", true,
		transcript.Message{Kind: transcript.KindAssistant, Text: "CLAUDE-ANSWER-2"})
	// Claude saw 1..2; Codex's turn is 4 (prompt) .. 7 (answer).
	if d.Kind != Delta || d.NativeID != s.rows["claude"].NativeID || d.Missed != (Range{4, 7}) || d.MissedCount != 4 {
		t.Fatalf("second claude turn: %+v", d)
	}
	if sl.Included != 3 || sl.Omitted != 0 {
		t.Fatalf("delta counts: %+v", sl)
	}
	for _, want := range []string{"add a test", "Command: go test ./...\nExit code: 0\nOutput:\nok", "CODEX-ANSWER"} {
		if n := countSub(sl.Text, want); n != 1 {
			t.Fatalf("delta holds %q %d times, want once:\n%s", want, n, sl.Text)
		}
	}
	for _, never := range []string{"CLAUDE-ANSWER-1", "write hello.go", "switched to"} {
		if countSub(sl.Text, never) != 0 {
			t.Fatalf("delta holds %q:\n%s", never, sl.Text)
		}
	}
	// Back to Claude with nothing new: reuse, not another delta.
	d, _ = s.turn(t, "claude", "thanks", true)
	if d.Kind != Reuse {
		t.Fatalf("third claude turn: %s", d.Kind)
	}
	// Codex then gets only Claude's two turns since its own.
	d, sl = s.turn(t, "codex", "again", true)
	if d.Kind != Delta || d.Missed != (Range{9, 11}) || sl.Included != 3 {
		t.Fatalf("codex again: %+v %+v", d, sl)
	}
	if countSub(sl.Text, "CODEX-ANSWER") != 0 || countSub(sl.Text, "CLAUDE-ANSWER-2") != 1 {
		t.Fatalf("codex delta:\n%s", sl.Text)
	}
}

func TestRefusedPromptRetryCarriesHandoff(t *testing.T) {
	s := &session{rows: map[string]Row{}}
	s.turn(t, "claude", "one", true, transcript.Message{Kind: transcript.KindAssistant, Text: "A1"})
	s.turn(t, "codex", "two", true, transcript.Message{Kind: transcript.KindAssistant, Text: "B1"})
	d1, _ := s.turn(t, "claude", "three", false) // not logged in
	if d1.Kind != Delta || s.rows["claude"].KnownUpto != 2 {
		t.Fatalf("refused: %+v row %+v", d1, s.rows["claude"])
	}
	d2, sl := s.turn(t, "claude", "three, again", true, transcript.Message{Kind: transcript.KindAssistant, Text: "A2"})
	if d2.Kind != Delta || d2.Missed != (Range{3, 5}) || countSub(sl.Text, "B1") != 1 || countSub(sl.Text, "three\n") != 1 {
		t.Fatalf("retry: %+v\n%s", d2, sl.Text)
	}

	// A refused first turn of a new agent records nothing: the retry is
	// still a rebuild.
	d3, _ := s.turn(t, "pi", "four", false)
	d4, _ := s.turn(t, "pi", "four again", true)
	if d3.Kind != Rebuild || d4.Kind != Rebuild {
		t.Fatalf("pi: %s then %s", d3.Kind, d4.Kind)
	}
}

func TestSeedForCursor(t *testing.T) {
	s := &session{rows: map[string]Row{}}
	s.turn(t, "claude", "one", true, transcript.Message{Kind: transcript.KindAssistant, Text: "A1"})
	d, sl := s.turn(t, "cursor", "two", true, transcript.Message{Kind: transcript.KindAssistant, Text: "C1"})
	if d.Kind != Seed || d.Missed != (Range{1, 2}) || sl.Included != 2 {
		t.Fatalf("cursor: %+v %+v", d, sl)
	}
	s.turn(t, "claude", "three", true, transcript.Message{Kind: transcript.KindAssistant, Text: "A2"})
	d, sl = s.turn(t, "cursor", "four", true)
	if d.Kind != Delta || d.Missed != (Range{5, 6}) || countSub(sl.Text, "A1") != 0 || countSub(sl.Text, "C1") != 0 {
		t.Fatalf("cursor delta: %+v\n%s", d, sl.Text)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Fresh: "fresh", Reuse: "reuse", Delta: "delta", Rebuild: "rebuild", Seed: "seed", Kind(42): "transition(42)"} {
		if k.String() != want {
			t.Errorf("%d: %q", int(k), k.String())
		}
	}
}

func ptr[T any](v T) *T { return &v }

func countSub(s, sub string) int { return strings.Count(s, sub) }

// A delta carries the rows the native session lacks, never its own rows
// between them: after Claude answered (9) while a message waited (8), and
// Codex ran (11, 12), Claude gets 8, 11 and 12.
func TestMissedMessagesLeaveOutWhatTheNativeHolds(t *testing.T) {
	var msgs []transcript.Message
	for _, seq := range []int64{7, 8, 9, 10, 11, 12} {
		msgs = append(msgs, transcript.Message{Seq: seq, Kind: transcript.KindUser, Text: "m"})
	}
	in := Input{Native: &Row{NativeID: "n1", KnownUpto: 9}, Missing: []Range{{8, 8}}, Content: ContentSeqs(msgs)}
	d := Transition(in)
	var got []int64
	for _, m := range in.MissedMessages(d, msgs) {
		got = append(got, m.Seq)
	}
	if d.Kind != Delta || fmt.Sprint(got) != "[8 10 11 12]" {
		t.Fatalf("%s carries %v, want delta of [8 10 11 12]", d.Kind, got)
	}
}
