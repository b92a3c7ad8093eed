package grok

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// fuzzConversation builds a neutral conversation from fuzz input: each
// byte of shape picks the next message's kind and tool call id, text fills
// in the bodies.
func fuzzConversation(shape []byte, text string) []transcript.Message {
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

// FuzzWriteRead checks that whatever the neutral copy holds, the writer
// produces a file the reader reads back with every user turn, every call
// paired with a result after it, and nothing invalid.
func FuzzWriteRead(f *testing.F) {
	f.Add([]byte{0, 3, 2, 4, 5, 2, 0, 12, 6, 7}, "hello")
	f.Add([]byte{4, 0, 5, 13, 5}, "/tmp/x")
	f.Add([]byte{1, 1, 2}, "")
	f.Fuzz(func(t *testing.T, shape []byte, text string) {
		if len(shape) > 64 {
			shape = shape[:64]
		}
		msgs := fuzzConversation(shape, text)
		dir := t.TempDir()
		w, err := Writer{}.Write(agents.Target{Home: filepath.Join(dir, "home"), Cwd: filepath.Join(dir, "proj"), SessionID: "fuzz"}, msgs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Reader{}.Read(w.Path)
		if err != nil && len(msgs) > 0 {
			t.Fatal(err)
		}
		checkWellFormed(t, got)
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
