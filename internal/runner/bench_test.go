package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/transcript"
)

// conversation10k is a 10,000-message session: user, tool call, tool
// result and answer, repeated.
func conversation10k() []transcript.Message {
	var msgs []transcript.Message
	for i := 0; len(msgs) < 10_000; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			transcript.Message{Kind: transcript.KindUser, Text: fmt.Sprintf("question %d about the code base, with some words to make it realistic", i)},
			transcript.Message{Kind: transcript.KindToolCall, Model: "m", ToolCall: &transcript.ToolCall{ID: id, Name: "bash", Input: `{"command":"ls -la"}`}},
			transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: "total 8\ndrwxr-xr-x 2 root root 4096 a\n-rw-r--r-- 1 root root 10 b"}},
			transcript.Message{Kind: transcript.KindAssistant, Model: "m", Text: fmt.Sprintf("answer %d: the directory holds two entries and nothing else of note", i)},
		)
	}
	return msgs
}

// BenchmarkPoll10k is what one poll of a changed native transcript costs
// on a 10k-message session (re-read with the agent's Reader, aligned with
// what was accounted, nothing new to emit).
func BenchmarkPoll10k(b *testing.B) {
	for _, tc := range []struct {
		name string
		w    agents.Writer
		r    agents.Reader
	}{
		{"claude", claude.Writer{TrimAbove: 1 << 40}, claude.Reader{}},
		{"codex", codex.Writer{}, codex.Reader{}},
		{"pi", pi.Writer{}, pi.Reader{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			home, cwd := b.TempDir(), b.TempDir()
			w, err := tc.w.Write(agents.Target{Home: home, Cwd: cwd, SessionID: "bench", Model: "m"}, conversation10k())
			if err != nil {
				b.Fatal(err)
			}
			tl := &tailer{reader: tc.r, path: w.Path, logf: func(string, ...any) {}}
			tl.baseline()
			b.Logf("%s: %d messages accounted", tc.name, len(tl.known))
			b.ResetTimer()
			for range b.N {
				tl.size, tl.next = -1, time.Time{} // force a re-read
				if !tl.poll(false, func(transcript.Message) { b.Fatal("emitted on a re-read") }) {
					b.Fatal("poll failed")
				}
			}
		})
	}
}
