package claude

import (
	"reflect"
	"strings"
	"testing"
)

// Content blocks a record leaves out while keeping the rest (a block type
// of a newer CLI, a block that does not decode) are counted by kind, not
// lost silently; thinking that holds nothing readable (signature only,
// redacted) is known and not reported.
func TestParseCountsBlocksItLeavesOut(t *testing.T) {
	const asst = `"type":"assistant","timestamp":"2026-11-30T10:00:01.000Z","message":{"role":"assistant","model":"claude-sonnet-4-5","content":`
	lines := []string{
		`{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"LO-U1 look"},{"type":"mystery","x":1}]}}`,
		`{"uuid":"a1","parentUuid":"u1",` + asst + `[{"type":"text","text":"LO-A1 seen"},{"type":"hologram"},"odd",{"type":"text","text":7}]}}`,
		`{"uuid":"a2","parentUuid":"a1",` + asst + `[{"type":"thinking","thinking":"","signature":"sig"},{"type":"redacted_thinking","data":"enc"}]}}`,
		`{"type":"user","uuid":"u2","parentUuid":"a2","timestamp":"2026-11-30T10:00:02.000Z","message":{"role":"user","content":"LO-U2 bye"}}`,
	}
	msgs, st, err := Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(msgs), "user:LO-U1 look\nassistant:LO-A1 seen\nuser:LO-U2 bye\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	want := map[string]int{"mystery block": 1, "hologram block": 1, "content block that did not decode": 2}
	if !reflect.DeepEqual(map[string]int(st.Kinds), want) {
		t.Errorf("skipped %v, want %v", st.Kinds, want)
	}
}
