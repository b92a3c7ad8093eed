package pi

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

var marker = regexp.MustCompile(`MARKER-[A-Z0-9]+`)

// probe is a short piece of text that must reach the model: the marker it
// carries, or else its first line.
func probe(s string) string {
	if m := marker.FindString(s); m != "" {
		return m
	}
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(first) > 30 {
		first = first[:30]
	}
	return first
}

// wantsFor lists what the model must receive for a neutral conversation
// written for pi: every user turn, assistant text and call/result pair.
func wantsFor(msgs []transcript.Message) []want {
	var ws []want
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindUser:
			ws = append(ws, want{role: "user", kind: "text", text: probe(m.Text)})
		case transcript.KindAssistant:
			ws = append(ws, want{role: "assistant", kind: "text", text: probe(m.Text)})
		case transcript.KindToolCall:
			ws = append(ws, want{role: "assistant", kind: "tool_call", tool: repair.ToolName(m.ToolCall.Name), id: m.ToolCall.ID})
		case transcript.KindToolResult:
			ws = append(ws, want{role: "tool", kind: "tool_result", text: probe(m.ToolResult.Output), id: m.ToolResult.CallID})
		}
	}
	return ws
}

// TestRealGeminiToPi: a conversation the real Gemini CLI produced (two
// turns, a real shell call) is read into the neutral copy, written for pi
// and continued by the real pi, which must send every turn.
func TestRealGeminiToPi(t *testing.T) {
	geminiBin, piBin := agenttest.Bin(t, "gemini"), agenttest.Bin(t, "pi")
	fake := fakemodel.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	gHome, gEnv := agenttest.Env(t, "gemini", fake.URL)
	gCwd := filepath.Join(gHome, "work")
	if err := os.MkdirAll(gCwd, 0o755); err != nil {
		t.Fatal(err)
	}
	sid := "0d6f7a8e-5b4c-4d3e-8f2a-1b0c9d8e7f6a"
	agenttest.MustRun(t, ctx, geminiBin, []string{"--session-id", sid, "--yolo", "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now MARKER-G1"}, gEnv, gCwd)
	agenttest.MustRun(t, ctx, geminiBin, []string{"--resume", sid, "-p", "what next? MARKER-G2"}, gEnv, gCwd)
	files, _ := filepath.Glob(filepath.Join(agenttest.NativeHome(gHome, "gemini"), "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
	// A resume also leaves a stray file with only a header and the CLI's
	// context when the minute changed; the conversation is the largest.
	msgs, err := gemini.Reader{}.Read(largest(t, files))
	if err != nil {
		t.Fatal(err)
	}

	home, env := agenttest.Env(t, "pi", fake.URL)
	cwd := filepath.Join(home, "work", "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Writer{}.Write(agents.Target{Home: agenttest.NativeHome(home, "pi"), Cwd: cwd, SessionID: "from-gemini",
		Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset()
	agenttest.MustRun(t, ctx, piBin, []string{"--session", w.Path, "-p", "--mode", "json", "and now? MARKER-NEW"}, env, cwd)
	turns := fake.Turns()
	if len(turns) != 1 {
		t.Fatalf("pi sent %d turns, want 1", len(turns))
	}
	wants := append(wantsFor(msgs), want{role: "user", kind: "text", text: "MARKER-NEW"})
	if len(wants) < 7 {
		t.Fatalf("the gemini session is too small to prove anything: %d items", len(wants))
	}
	assertInOrder(t, turns[0].Items, wants)
}

// largest is the biggest of files, failing when there is none.
func largest(t *testing.T, files []string) string {
	t.Helper()
	best, size := "", int64(-1)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			best, size = f, fi.Size()
		}
	}
	if best == "" {
		t.Fatal("no gemini session file")
	}
	return best
}
