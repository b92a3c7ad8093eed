package gemini

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// bigConversation is n messages in cycles of user, thinking, assistant
// text, tool call and tool result, with texts of a realistic size.
func bigConversation(n int) []transcript.Message {
	msgs := make([]transcript.Message, 0, n)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; len(msgs) < n; i++ {
		t := base.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("call_%d", i)
		for _, m := range []transcript.Message{
			{Kind: transcript.KindUser, Text: fmt.Sprintf("Please look at file %d and tell me what it does; keep it short.", i)},
			{Kind: transcript.KindThinking, Text: "I should read the file before answering, then summarise it."},
			{Kind: transcript.KindAssistant, Text: "Let me read it first."},
			{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: "read_file", Input: fmt.Sprintf(`{"path":"src/file%d.go"}`, i)}},
			{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: "package main\n\nfunc main() {\n\tprintln(\"hello, world\")\n}\n"}},
		} {
			if len(msgs) < n {
				m.Time, m.Agent = t, "claude"
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// BenchmarkWrite100k writes a 100k-message conversation natively and, in
// the same run, as plain encoding/json, both reported in MB/s of output.
func BenchmarkWrite100k(b *testing.B) {
	msgs := bigConversation(100_000)
	b.Run("native", func(b *testing.B) {
		dir := b.TempDir()
		tg := agents.Target{Home: filepath.Join(dir, "home"), Cwd: filepath.Join(dir, "proj"), SessionID: "bench"}
		for b.Loop() {
			w, err := Writer{}.Write(tg, msgs)
			if err != nil {
				b.Fatal(err)
			}
			if fi, err := os.Stat(w.Path); err == nil {
				b.SetBytes(fi.Size())
			}
		}
	})
	b.Run("json-baseline", func(b *testing.B) {
		for b.Loop() {
			data, err := json.Marshal(msgs)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
		}
	})
}
