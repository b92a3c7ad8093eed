package gemini

import (
	"reflect"
	"strings"
	"testing"
)

// What a Gemini CLI session holds that the reader does not know (a newer
// record type, a line of an unknown shape, a broken line) is counted, not
// dropped silently; the CLI's own UI records are known and not reported.
func TestDecodeCountsWhatItSkips(t *testing.T) {
	lines := []string{
		`{"sessionId":"s1","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"main"}`,
		`{"id":"r1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":"GSK-U1 hello"}]}`,
		`{"id":"r2","timestamp":"2026-11-30T10:00:02.000Z","type":"info","content":"UI only"}`,
		`{"id":"r3","timestamp":"2026-11-30T10:00:03.000Z","type":"gemini","content":"GSK-A1 hi","model":"m"}`,
		`{"id":"r4","timestamp":"2026-11-30T10:00:04.000Z","type":"hologram","content":"x"}`,
		`{"$future":{"x":1}}`,
		`{"oops`,
	}
	d, err := Decode([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range d.Messages {
		got = append(got, m.Kind.String()+" "+m.Text)
	}
	if want := []string{"user GSK-U1 hello", "assistant GSK-A1 hi"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	want := map[string]int{"hologram record": 1, "line of an unknown shape": 1, "malformed line": 1}
	if !reflect.DeepEqual(map[string]int(d.Kinds), want) {
		t.Errorf("skipped %v, want %v", d.Kinds, want)
	}
}
