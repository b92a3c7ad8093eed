package gemini

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// TestRealPiToGemini: a conversation the real pi produced (two turns, a
// real bash call) is read into the neutral copy, written for Gemini and
// resumed by the real Gemini CLI, which must send every turn.
func TestRealPiToGemini(t *testing.T) {
	piBin, geminiBin := agenttest.Bin(t, "pi"), agenttest.Bin(t, "gemini")
	fake := fakemodel.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	piHome, piEnv := agenttest.Env(t, "pi", fake.URL)
	piCwd := agenttest.Cwd(t, piHome, "work")
	src := filepath.Join(t.TempDir(), "pi.jsonl")
	model := []string{"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel, "--session", src, "-p"}
	agenttest.MustRun(t, ctx, piBin, append(model, "please TOOLCALL CMD[echo MARKER-SHELL] now MARKER-P1"), piEnv, piCwd)
	agenttest.MustRun(t, ctx, piBin, append(model, "/etc/hosts says what? MARKER-P2"), piEnv, piCwd)
	msgs, err := pi.Reader{}.Read(src)
	if err != nil {
		t.Fatal(err)
	}

	home, env := agenttest.Env(t, "gemini", fake.URL)
	cwd := agenttest.Cwd(t, home, "work", "proj")
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
	wants := append(agenttest.WantsFor(msgs, toolName), agenttest.Want{Role: "user", Kind: "text", Text: "MARKER-NEW"})
	if len(wants) < 7 {
		t.Fatalf("the pi session is too small to prove anything: %d items", len(wants))
	}
	agenttest.AssertInOrder(t, turns[len(turns)-1].Items, wants)
}
