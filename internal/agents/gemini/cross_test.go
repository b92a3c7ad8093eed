package gemini

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/pi"
)

// TestRealPiToGemini: a conversation the real pi produced (two turns, a
// real bash call) is read into the neutral copy, written for Gemini and
// resumed by the real Gemini CLI, which must send every turn.
func TestRealPiToGemini(t *testing.T) {
	ctx := agenttest.Deadline(t, 4*time.Minute)
	src := agenttest.NewSandbox(t, "pi", nil, "work")
	session := filepath.Join(t.TempDir(), "pi.jsonl")
	model := []string{"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel, "--session", session, "-p"}
	src.Run(t, ctx, append(model, "please TOOLCALL CMD[echo MARKER-SHELL] now MARKER-P1")...)
	src.Run(t, ctx, append(model, "/etc/hosts says what? MARKER-P2")...)
	msgs, err := pi.Reader{}.Read(session)
	if err != nil {
		t.Fatal(err)
	}

	agenttest.NewSandbox(t, "gemini", src.Fake, "work", "proj").CheckCarriedOver(t, ctx, "pi", msgs,
		func(native, cwd string) (agents.Written, error) {
			return Writer{}.Write(agents.Target{Home: native, Cwd: cwd, SessionID: "from-pi"}, msgs)
		},
		func(w agents.Written) []string { return []string{"--resume", w.NativeID, "-p", "and now? MARKER-NEW"} },
		toolName, false)
}
