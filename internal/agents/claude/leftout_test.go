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
		// The CLI's own bookkeeping, newer records included: known, not reported.
		`{"type":"ai-title","aiTitle":"Looking around","sessionId":"s"}`,
		`{"type":"custom-title","customTitle":"mine","sessionId":"s"}`,
		`{"type":"permission-mode","permissionMode":"default","sessionId":"s"}`,
		`{"type":"agent-name","agentName":"helper","sessionId":"s"}`,
		`{"type":"mode","mode":"normal","sessionId":"s"}`,
		`{"type":"last-prompt","lastPrompt":"LO-U2 bye","sessionId":"s"}`,
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

// A record that does not decode is counted by what it was, not lost, and
// content the API allows in another shape (an assistant's text as a
// string) is read.
func TestParseCountsDecodingFailuresByKind(t *testing.T) {
	const u1 = `{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":"DF-U1 go"}}`
	const asst = `{"type":"assistant","uuid":"a1","parentUuid":"u1","timestamp":"2026-11-30T10:00:01.000Z","message":{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":`
	for _, tc := range []struct {
		name, line string
		want       string
		skipped    map[string]int
	}{
		{"a record field of another JSON type", `{"type":"user","uuid":"u2","isSidechain":"no","message":{"role":"user","content":"x"}}`,
			"user:DF-U1 go\n", map[string]int{"user record that did not decode": 1}},
		{"a broken line", `{"type":"user",`, "user:DF-U1 go\n", map[string]int{"malformed line": 1}},
		{"a message that does not decode", `{"type":"user","uuid":"u2","parentUuid":"u1","message":{"role":7,"content":"x"}}`,
			"user:DF-U1 go\n", map[string]int{"user message that did not decode": 1}},
		{"assistant content that is no list", asst + `{"type":"text","text":"x"}}}`,
			"user:DF-U1 go\n", map[string]int{"content block that did not decode": 1}},
		{"assistant content as a string", asst + `"DF-A1 said"}}`, "user:DF-U1 go\nassistant:DF-A1 said\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, st, err := Parse(strings.NewReader(u1 + "\n" + tc.line + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(msgs); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if len(st.Kinds) > 0 || len(tc.skipped) > 0 {
				if !reflect.DeepEqual(map[string]int(st.Kinds), tc.skipped) {
					t.Errorf("skipped %v, want %v", st.Kinds, tc.skipped)
				}
			}
		})
	}
}
