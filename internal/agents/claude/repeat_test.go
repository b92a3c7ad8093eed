package claude

import (
	"reflect"
	"strings"
	"testing"
)

// An assistant message Claude Code wrote twice (the same API message id and
// content on two lines, the second chained after the first) is read once;
// the lines of one streamed message (one block a line, one id) all stay.
// What was left out is counted by kind.
func TestRepeatedAssistantRecordReadOnce(t *testing.T) {
	const asst = `"type":"assistant","timestamp":"2026-11-30T10:00:01.000Z","message":{"id":"msg_REP1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":`
	lines := []string{
		`{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":"REP-U1 list it"}}`,
		`{"uuid":"a1","parentUuid":"u1",` + asst + `[{"type":"thinking","thinking":"REP-THINK","signature":"sig"}]}}`,
		`{"uuid":"a2","parentUuid":"a1",` + asst + `[{"type":"text","text":"REP-A1 listing"}]}}`,
		`{"uuid":"a3","parentUuid":"a2",` + asst + `[{"type":"tool_use","id":"toolu_REP","name":"Bash","input":{"command":"ls"}}]}}`,
		// The same message again, whole, on a line of its own.
		`{"uuid":"a4","parentUuid":"a3",` + asst + `[{"type":"thinking","thinking":"REP-THINK","signature":"sig"},{"type":"text","text":"REP-A1 listing"},{"type":"tool_use","id":"toolu_REP","name":"Bash","input":{"command":"ls"}}]}}`,
		`{"type":"user","uuid":"u2","parentUuid":"a4","timestamp":"2026-11-30T10:00:02.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_REP","content":"REP-OUT"}]}}`,
		`{"type":"assistant","uuid":"a5","parentUuid":"u2","timestamp":"2026-11-30T10:00:03.000Z","message":{"id":"msg_REP2","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"REP-A2 ok"},{"type":"text","text":"REP-A2 ok"}]}}`,
		`{"type":"assistant","uuid":"a6","parentUuid":"a5","timestamp":"2026-11-30T10:00:03.000Z","message":{"id":"msg_REP2","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"REP-A2 ok"},{"type":"text","text":"REP-A2 ok"}]}}`,
		`{"type":"last-prompt","lastPrompt":"REP-U1 list it","leafUuid":"a6"}`,
		`{"type":"future-record","uuid":"f1","parentUuid":"a6"}`,
		`not json`,
	}
	msgs, st, err := Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	want := "user:REP-U1 list it\nthinking:REP-THINK\nassistant:REP-A1 listing\ntool_call:Bash#toolu_REP\ntool_result:#toolu_REP\nassistant:REP-A2 ok\nassistant:REP-A2 ok\n"
	if got := kinds(msgs); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	wantKinds := map[string]int{"repeated assistant record": 2, "future-record": 1, "malformed line": 1}
	if !reflect.DeepEqual(map[string]int(st.Kinds), wantKinds) {
		t.Errorf("skipped %v, want %v", st.Kinds, wantKinds)
	}
}
