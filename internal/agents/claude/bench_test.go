package claude

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// benchMessages is a 100k-message conversation: user turns, assistant text
// and tool call/result pairs, as a long agent session looks.
func benchMessages() []transcript.Message {
	msgs := make([]transcript.Message, 0, 100_000)
	for i := 0; len(msgs) < 100_000; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			transcript.Message{Kind: transcript.KindUser, Text: fmt.Sprintf("step %d: please run the tests and fix what fails", i)},
			transcript.Message{Kind: transcript.KindAssistant, Text: "Running the test suite now.", Model: "claude-sonnet-4-5"},
			transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: "Bash", Input: `{"command":"go test ./..."}`}},
			transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: "ok  \tpkg\t0.123s\nok  \tpkg/sub\t0.456s"}},
		)
	}
	return msgs[:100_000]
}

// BenchmarkWrite100k reports the writer's throughput over the neutral
// data's JSON size, next to encoding/json marshalling the same messages.
// Trimming is off so all 100k messages are rendered.
func BenchmarkWrite100k(b *testing.B) {
	msgs := benchMessages()
	base, err := json.Marshal(msgs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(base)))
		for b.Loop() {
			if _, err := json.Marshal(msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("claude", func(b *testing.B) {
		dir := b.TempDir()
		t := agents.Target{Home: filepath.Join(dir, "h"), Cwd: dir, SessionID: "bench"}
		w := Writer{TrimAbove: 1 << 40}
		b.SetBytes(int64(len(base)))
		for b.Loop() {
			if _, err := w.Write(t, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
