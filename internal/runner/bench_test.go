package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
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

// appendClaudeTurn appends a prompt and an answer to a Claude transcript,
// chained to its last record, the way the CLI appends a resumed turn.
func appendClaudeTurn(tb testing.TB, path, prompt, answer string) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	var leaf struct {
		UUID string `json:"uuid"`
	}
	for i := len(lines) - 1; i >= 0 && leaf.UUID == ""; i-- {
		_ = json.Unmarshal(lines[i], &leaf)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, `{"type":"user","uuid":"u-new","parentUuid":%q,"timestamp":"2026-01-02T03:04:06.000Z","message":{"role":"user","content":%q}}`+"\n", leaf.UUID, prompt)
	fmt.Fprintf(f, `{"type":"assistant","uuid":"a-new","parentUuid":"u-new","timestamp":"2026-01-02T03:04:07.000Z","message":{"id":"msg_new","model":"m","role":"assistant","content":[{"type":"text","text":%q}]}}`+"\n", answer)
}

func claudeTailer(tb testing.TB) (*tailer, string) {
	home, cwd := tb.TempDir(), tb.TempDir()
	w, err := claude.Writer{TrimAbove: 1 << 40}.Write(agents.Target{Home: home, Cwd: cwd, SessionID: "bench", Model: "m"}, conversation10k())
	if err != nil {
		tb.Fatal(err)
	}
	d, err := newDriver(mustAgent(tb, "claude"), Turn{Agent: "claude", Home: home, Cwd: cwd, NativePath: w.Path, Prompt: "next question"}, func(string, ...any) {})
	if err != nil {
		tb.Fatal(err)
	}
	d.tail.path = w.Path
	d.tail.baseline()
	return d.tail, w.Path
}

func mustAgent(tb testing.TB, name string) agents.Agent {
	a, ok := agents.Lookup(name)
	if !ok {
		tb.Fatal(name)
	}
	return a
}

// TestSuffixTail: a turn appended to a long Claude transcript is read from
// the turn's start offset and emitted with the NativeIDs a whole read gives.
func TestSuffixTail(t *testing.T) {
	t.Parallel()
	tl, path := claudeTailer(t)
	appendClaudeTurn(t, path, "next question", "the answer")
	var got []transcript.Message
	if !tl.poll(true, func(m transcript.Message) { got = append(got, m) }) {
		t.Fatal("poll failed")
	}
	if len(got) != 1 || got[0].Text != "the answer" || got[0].NativeID != "a-new" || tl.state != promptFound {
		t.Fatalf("emitted %+v (prompt %v)", got, tl.state)
	}
	all, err := claude.Reader{}.Read(path)
	if err != nil || all[len(all)-1].NativeID != "a-new" || len(all) != 10_002 {
		t.Fatalf("whole read: %d messages, %v", len(all), err)
	}
}

// BenchmarkPollSuffix10k: the same poll on a 10k-message session in
// append-only mode (what the runner does for claude, codex and pi).
func BenchmarkPollSuffix10k(b *testing.B) {
	tl, path := claudeTailer(b)
	appendClaudeTurn(b, path, "next question", "the answer")
	b.ResetTimer()
	for range b.N {
		tl.size, tl.next = -1, time.Time{}
		if !tl.poll(false, func(transcript.Message) {}) {
			b.Fatal("poll failed")
		}
	}
}
