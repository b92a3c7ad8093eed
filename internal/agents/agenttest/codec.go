package agenttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// FuzzConversation builds a neutral conversation from fuzz input: each
// byte of shape picks the next message's kind and tool call id, text fills
// in the bodies.
func FuzzConversation(shape []byte, text string) []transcript.Message {
	var msgs []transcript.Message
	for i, c := range shape {
		id := fmt.Sprintf("c%d", c%4)
		switch c % 8 {
		case 0, 1:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindUser, Text: text})
		case 2:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindAssistant, Text: text})
		case 3:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindThinking, Text: text})
		case 4:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: text + "x", Input: text}})
		case 5:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: text, IsError: i%2 == 0}})
		case 6:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeHandoff, Text: text})
		case 7:
			msgs = append(msgs, transcript.Message{Kind: transcript.KindInternal, Text: text})
		}
	}
	return msgs
}

// FuzzWriteRead checks that whatever the neutral copy holds, w produces a
// file r reads back with every user turn, every call paired with a result
// after it, and nothing invalid (wellFormed checks what the codec's reader
// promises beyond that). A codec's FuzzWriteRead calls it with its own
// writer, reader and check.
func FuzzWriteRead(f *testing.F, w agents.Writer, r agents.Reader, wellFormed func(*testing.T, []transcript.Message)) {
	f.Add([]byte{0, 3, 2, 4, 5, 2, 0, 12, 6, 7}, "hello")
	f.Add([]byte{4, 0, 5, 13, 5}, "/tmp/x")
	f.Add([]byte{1, 1, 2}, "")
	f.Fuzz(func(t *testing.T, shape []byte, text string) {
		if len(shape) > 64 {
			shape = shape[:64]
		}
		msgs := FuzzConversation(shape, text)
		dir := t.TempDir()
		wr, err := w.Write(agents.Target{Home: filepath.Join(dir, "home"), Cwd: filepath.Join(dir, "proj"), SessionID: "fuzz"}, msgs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Read(wr.Path)
		if err != nil && len(msgs) > 0 {
			t.Fatal(err)
		}
		wellFormed(t, got)
		users := 0
		for _, m := range msgs {
			if m.Kind == transcript.KindUser {
				users++
			}
		}
		open := map[string]bool{}
		gotUsers := 0
		for _, m := range got {
			switch m.Kind {
			case transcript.KindUser:
				gotUsers++
			case transcript.KindToolCall:
				open[m.ToolCall.ID] = true
			case transcript.KindToolResult:
				delete(open, m.ToolResult.CallID)
			case transcript.KindInternal:
				t.Fatal("internal row read back")
			}
		}
		if gotUsers < users {
			t.Fatalf("%d user turns written, %d read back", users, gotUsers)
		}
		if len(open) > 0 {
			t.Fatalf("calls without results: %v", open)
		}
	})
}

// BigConversation is n messages in cycles of user, thinking, assistant
// text, tool call and tool result, with texts of a realistic size.
func BigConversation(n int) []transcript.Message {
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

// BenchWrite100k writes a 100k-message BigConversation with w and, in the
// same run, as plain encoding/json, both reported in MB/s of output.
func BenchWrite100k(b *testing.B, w agents.Writer) {
	msgs := BigConversation(100_000)
	b.Run("native", func(b *testing.B) {
		dir := b.TempDir()
		tg := agents.Target{Home: filepath.Join(dir, "home"), Cwd: filepath.Join(dir, "proj"), SessionID: "bench"}
		for b.Loop() {
			wr, err := w.Write(tg, msgs)
			if err != nil {
				b.Fatal(err)
			}
			if fi, err := os.Stat(wr.Path); err == nil {
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

// CheckWellFormed asserts what every reader result must hold: valid
// messages and every result after its call.
func CheckWellFormed(t *testing.T, msgs []transcript.Message) {
	t.Helper()
	calls := map[string]bool{}
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		switch m.Kind {
		case transcript.KindToolCall:
			calls[m.ToolCall.ID] = true
		case transcript.KindToolResult:
			if !calls[m.ToolResult.CallID] {
				t.Errorf("message %d: result for %q before any call", i, m.ToolResult.CallID)
			}
		}
	}
}

// LoremConversation is n messages cycling user, assistant, a Bash call
// and its result (exit 0), with texts of a few hundred bytes.
func LoremConversation(n int) []transcript.Message {
	msgs := make([]transcript.Message, 0, n)
	pad := strings.Repeat("lorem ipsum ", 20)
	zero := int32(0)
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		res := ToolResult(id, fmt.Sprintf("%d %s", i, pad), false)
		res.ToolResult.ExitCode = &zero
		msgs = append(msgs,
			User(fmt.Sprintf("u%d %s", i, pad)),
			Asst(fmt.Sprintf("a%d %s", i, pad)),
			Call(id, "Bash", fmt.Sprintf(`{"command":"echo %d"}`, i)),
			res)
	}
	return msgs[:n]
}

// BenchVersusJSON runs plain encoding/json of msgs ("json-baseline") and
// write (as name, its own b.Loop) side by side, with MB/s over msgs'
// neutral JSON size in both, so the two figures compare directly.
func BenchVersusJSON(b *testing.B, msgs []transcript.Message, name string, write func(b *testing.B)) {
	raw, _ := json.Marshal(msgs)
	b.Run("json-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := json.Marshal(msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		write(b)
	})
}
