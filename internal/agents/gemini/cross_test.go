package gemini

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
	"github.com/cast-dev/cast/internal/agents/pi"
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
// written for Gemini: every user turn, assistant text and call/result pair.
func wantsFor(msgs []transcript.Message) []want {
	var ws []want
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindUser:
			ws = append(ws, want{role: "user", kind: "text", text: probe(m.Text)})
		case transcript.KindAssistant:
			ws = append(ws, want{role: "assistant", kind: "text", text: probe(m.Text)})
		case transcript.KindToolCall:
			ws = append(ws, want{role: "assistant", kind: "tool_call", tool: toolName(m.ToolCall.Name), id: m.ToolCall.ID})
		case transcript.KindToolResult:
			ws = append(ws, want{role: "tool", kind: "tool_result", text: probe(m.ToolResult.Output), id: m.ToolResult.CallID})
		}
	}
	return ws
}

// TestRealPiToGemini: a conversation the real pi produced (two turns, a
// real bash call) is read into the neutral copy, written for Gemini and
// resumed by the real Gemini CLI, which must send every turn.
func TestRealPiToGemini(t *testing.T) {
	piBin, geminiBin := agenttest.Bin(t, "pi"), agenttest.Bin(t, "gemini")
	fake := fakemodel.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	piHome, piEnv := agenttest.Env(t, "pi", fake.URL)
	piCwd := filepath.Join(piHome, "work")
	if err := os.MkdirAll(piCwd, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "pi.jsonl")
	model := []string{"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel, "--session", src, "-p"}
	agenttest.MustRun(t, ctx, piBin, append(model, "please TOOLCALL CMD[echo MARKER-SHELL] now MARKER-P1"), piEnv, piCwd)
	agenttest.MustRun(t, ctx, piBin, append(model, "/etc/hosts says what? MARKER-P2"), piEnv, piCwd)
	msgs, err := pi.Reader{}.Read(src)
	if err != nil {
		t.Fatal(err)
	}

	home, env := agenttest.Env(t, "gemini", fake.URL)
	cwd := filepath.Join(home, "work", "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Writer{}.Write(agents.Target{Home: agenttest.NativeHome(home, "gemini"), Cwd: cwd, SessionID: "from-pi"}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset()
	agenttest.MustRun(t, ctx, geminiBin, []string{"--resume", w.NativeID, "-p", "and now? MARKER-NEW"}, env, cwd)
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("gemini sent no turn")
	}
	wants := append(wantsFor(msgs), want{role: "user", kind: "text", text: "MARKER-NEW"})
	if len(wants) < 7 {
		t.Fatalf("the pi session is too small to prove anything: %d items", len(wants))
	}
	assertInOrder(t, turns[len(turns)-1].Items, wants)
}
