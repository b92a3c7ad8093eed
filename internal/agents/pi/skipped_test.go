package pi

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// What a pi session holds that the reader does not know (a newer entry
// type, role or block, a broken line) is counted, not dropped silently;
// settings entries pi writes itself are known and not reported.
func TestDecodeCountsWhatItSkips(t *testing.T) {
	lines := []string{
		`{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w"}`,
		`{"type":"model_change","id":"e1","parentId":null,"timestamp":"2026-11-30T10:00:00.000Z","provider":"p","modelId":"m"}`,
		`{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-11-30T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"SK-U1 hello"}]}}`,
		`{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-11-30T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"SK-A1 hi"},{"type":"hologram","data":"x"}],"model":"m"}}`,
		`{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-11-30T10:00:03.000Z","message":{"role":"narrator","content":"SK-N1"}}`,
		`{"type":"time_travel","id":"e5","parentId":"e4","timestamp":"2026-11-30T10:00:04.000Z"}`,
		`{"type":"message","id":"e6","parentId":"e5","timestamp":"2026-11-30T10:00:05.000Z","message":{"role":"user","content":[{"type":"text","text":"SK-U2 bye"}]}}`,
		`{"oops`,
	}
	d, err := Decode([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckReport(t, d.Messages, d.Kinds, []string{"user SK-U1 hello", "assistant SK-A1 hi", "user SK-U2 bye"},
		map[string]int{"hologram block": 1, "narrator message": 1, "time_travel entry": 1, "malformed line": 1})
}

// What pi's resumed branch does not hold, and parts an entry leaves out
// while keeping the rest, are counted by kind: entries of an abandoned
// branch, a message entry without its message, a tool result without its
// call id, a block of an unknown type or one that does not decode.
func TestDecodeCountsWhatTheBranchLeavesOut(t *testing.T) {
	lines := []string{
		`{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w"}`,
		`{"type":"message","id":"e1","parentId":null,"timestamp":"2026-11-30T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"PLO-U1 hi"},{"type":"audio","data":"x"},7]}}`,
		`{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-11-30T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"PLO-ABANDONED"}],"model":"m"}}`,
		`{"type":"model_change","id":"e3","parentId":"e2","timestamp":"2026-11-30T10:00:02.000Z","provider":"p","modelId":"m"}`,
		`{"type":"message","id":"e4","parentId":"e1","timestamp":"2026-11-30T10:00:03.000Z"}`,
		`{"type":"message","id":"e5","parentId":"e4","timestamp":"2026-11-30T10:00:04.000Z","message":{"role":"toolResult","content":[{"type":"text","text":"orphan"}]}}`,
		`{"type":"message","id":"e6","parentId":"e5","timestamp":"2026-11-30T10:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"PLO-A1 hello"}],"model":"m"}}`,
	}
	d, err := Decode([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckReport(t, d.Messages, d.Kinds, []string{"user PLO-U1 hi", "assistant PLO-A1 hello"},
		map[string]int{"entry of an abandoned branch": 1, "audio block": 1, "content block that did not decode": 1,
			"message entry without a message": 1, "tool result without a call id": 1})
}

// A line of a known type that does not decode (a field of another JSON
// type) is counted as that type's decoding failure, apart from broken
// lines.
func TestDecodeCountsDecodingFailuresByKind(t *testing.T) {
	const head = `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w"}`
	const user = `{"type":"message","id":"e1","parentId":null,"timestamp":"2026-11-30T10:00:01.000Z","message":{"role":"user","content":"PDF-U1 hi"}}`
	for _, tc := range []struct {
		name, line string
		skipped    map[string]int
	}{
		{"an entry", `{"type":"message","id":"e2","parentId":"e1","message":{"role":["user"]}}`, map[string]int{"message entry that did not decode": 1}},
		{"a header", `{"type":"session","version":"three","id":"s2"}`, map[string]int{"session header that did not decode": 1}},
		{"a broken line", `{"type":"message",`, map[string]int{"malformed line": 1}},
		{"content that is no list", `{"type":"message","id":"e2","parentId":"e1","message":{"role":"assistant","content":{"type":"text"}}}`,
			map[string]int{"content block that did not decode": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decode([]byte(head + "\n" + user + "\n" + tc.line))
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckReport(t, d.Messages, d.Kinds, []string{"user PDF-U1 hi"}, tc.skipped)
		})
	}
}
