package pi

import (
	"reflect"
	"strings"
	"testing"
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
	var got []string
	for _, m := range d.Messages {
		got = append(got, m.Kind.String()+" "+m.Text)
	}
	if want := []string{"user SK-U1 hello", "assistant SK-A1 hi", "user SK-U2 bye"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	want := map[string]int{"hologram block": 1, "narrator message": 1, "time_travel entry": 1, "malformed line": 1}
	if !reflect.DeepEqual(map[string]int(d.Kinds), want) {
		t.Errorf("skipped %v, want %v", d.Kinds, want)
	}
}
