package claude

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

// sized makes n alternating user/assistant messages of exactly 1000
// estimated tokens each (3968 bytes / 4 + 8), seqs starting at 101 so seq
// and position differ.
func sized(n int) []transcript.Message {
	var out []transcript.Message
	for i := range n {
		m := transcript.Message{Kind: transcript.KindAssistant, Seq: int64(101 + i)}
		if i%2 == 0 {
			m.Kind = transcript.KindUser
		}
		tag := fmt.Sprintf("M%03d ", i)
		m.Text = tag + strings.Repeat("x", 3968-len(tag))
		out = append(out, m)
	}
	return out
}

func TestTrimThresholds(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		omitted  int
		note     string
		keptUser int // earlier user messages kept in front of the tail
	}{
		{"at the threshold nothing is cut", 180, 0, "", 0},
		// 181k > 180k: the newest 160 (160k) stay; of the first 21, the 11
		// user messages stay and the 10 assistant ones (seq 102..120) go.
		{"one over the threshold", 181, 10, "cast read ses-1 102:120", 11},
		{"well over", 400, 120, "cast read ses-1 102:340", 120},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := sized(tc.n)
			w, err := Writer{}.Write(target(t), in)
			if err != nil {
				t.Fatal(err)
			}
			if w.Omitted != tc.omitted {
				t.Fatalf("omitted %d, want %d", w.Omitted, tc.omitted)
			}
			lines := checkFile(t, w.Path)
			var notes []string
			var texts []string
			for _, l := range lines {
				msg := l["message"].(map[string]any)
				if l["isMeta"] == true {
					notes = append(notes, msg["content"].(string))
					texts = append(texts, "NOTE")
					continue
				}
				if s, ok := msg["content"].(string); ok {
					texts = append(texts, s[:4])
				} else {
					texts = append(texts, msg["content"].([]any)[0].(map[string]any)["text"].(string)[:4])
				}
			}
			if tc.note == "" {
				if len(notes) != 0 || len(lines) != tc.n {
					t.Fatalf("untrimmed file has %d lines and notes %q", len(lines), notes)
				}
				return
			}
			if len(notes) != 1 || !strings.Contains(notes[0], tc.note) ||
				!strings.Contains(notes[0], fmt.Sprintf("%d earlier messages", tc.omitted)) {
				t.Fatalf("notes %q, want one naming %d messages and %q", notes, tc.omitted, tc.note)
			}
			// Order: the kept earlier instructions, the note, then the tail.
			want := tc.keptUser
			if texts[want] != "NOTE" {
				t.Fatalf("note at %d, want %d: %v", indexOf(texts, "NOTE"), want, texts[:want+2])
			}
			for i := 0; i < want; i++ {
				if texts[i] != fmt.Sprintf("M%03d", 2*i) {
					t.Fatalf("kept instruction %d is %s", i, texts[i])
				}
			}
			if last := texts[len(texts)-1]; last != fmt.Sprintf("M%03d", tc.n-1) {
				t.Errorf("tail ends with %s", last)
			}
			tailTokens := 0
			for _, m := range in[tc.n-(len(texts)-want-1):] {
				tailTokens += estimate(m)
			}
			if tailTokens > DefaultKeepTail {
				t.Errorf("tail is %d tokens, over %d", tailTokens, DefaultKeepTail)
			}
			// The neutral reader does not turn the note into a message.
			back, _ := Reader{}.Read(w.Path)
			if len(back) != len(texts)-1 {
				t.Errorf("read back %d messages, want %d", len(back), len(texts)-1)
			}
		})
	}
}

func TestTrimKeepsPairs(t *testing.T) {
	// A tail that would open with a tool result drops it rather than leave
	// an orphan; the call went with the omitted part.
	var in []transcript.Message
	in = append(in, u("start"))
	in = append(in, call("c1", "Bash", `{"command":"`+strings.Repeat("y", 400)+`"}`))
	in = append(in, result("c1", strings.Repeat("z", 400)))
	in = append(in, a("end"))
	w, err := Writer{TrimAbove: 150, KeepTail: 120}.Write(target(t), in)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, w.Path)
	if w.Omitted != 2 {
		t.Errorf("omitted %d, want the call and its result", w.Omitted)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
