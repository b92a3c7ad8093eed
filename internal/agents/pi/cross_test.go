package pi

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/agents/repair"
)

// TestRealGeminiToPi: a conversation the real Gemini CLI produced (two
// turns, a real shell call) is read into the neutral copy, written for pi
// and continued by the real pi, which must send every turn.
func TestRealGeminiToPi(t *testing.T) {
	ctx := agenttest.Deadline(t, 4*time.Minute)
	src := agenttest.NewSandbox(t, "gemini", nil, "work")
	sid := "0d6f7a8e-5b4c-4d3e-8f2a-1b0c9d8e7f6a"
	src.Run(t, ctx, "--session-id", sid, "--yolo", "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now MARKER-G1")
	src.Run(t, ctx, "--resume", sid, "-p", "what next? MARKER-G2")
	files, _ := filepath.Glob(filepath.Join(src.Native, "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
	// A resume also leaves a stray file with only a header and the CLI's
	// context when the minute changed; the conversation is the largest.
	msgs, err := gemini.Reader{}.Read(agenttest.Largest(t, files))
	if err != nil {
		t.Fatal(err)
	}

	agenttest.NewSandbox(t, "pi", src.Fake, "work", "proj").CheckCarriedOver(t, ctx, "gemini", msgs,
		func(native, cwd string) (agents.Written, error) {
			return Writer{}.Write(agents.Target{Home: native, Cwd: cwd, SessionID: "from-gemini",
				Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}, msgs)
		},
		func(w agents.Written) []string {
			return []string{"--session", w.Path, "-p", "--mode", "json", "and now? MARKER-NEW"}
		},
		repair.ToolName, true)
}
