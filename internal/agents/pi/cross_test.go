package pi

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// TestRealGeminiToPi: a conversation the real Gemini CLI produced (two
// turns, a real shell call) is read into the neutral copy, written for pi
// and continued by the real pi, which must send every turn.
func TestRealGeminiToPi(t *testing.T) {
	geminiBin, piBin := agenttest.Bin(t, "gemini"), agenttest.Bin(t, "pi")
	fake := fakemodel.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	gHome, gEnv := agenttest.Env(t, "gemini", fake.URL)
	gCwd := agenttest.Cwd(t, gHome, "work")
	sid := "0d6f7a8e-5b4c-4d3e-8f2a-1b0c9d8e7f6a"
	agenttest.MustRun(t, ctx, geminiBin, []string{"--session-id", sid, "--yolo", "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now MARKER-G1"}, gEnv, gCwd)
	agenttest.MustRun(t, ctx, geminiBin, []string{"--resume", sid, "-p", "what next? MARKER-G2"}, gEnv, gCwd)
	files, _ := filepath.Glob(filepath.Join(agenttest.NativeHome(gHome, "gemini"), "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
	// A resume also leaves a stray file with only a header and the CLI's
	// context when the minute changed; the conversation is the largest.
	msgs, err := gemini.Reader{}.Read(agenttest.Largest(t, files))
	if err != nil {
		t.Fatal(err)
	}

	home, env := agenttest.Env(t, "pi", fake.URL)
	cwd := agenttest.Cwd(t, home, "work", "proj")
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
	wants := append(agenttest.WantsFor(msgs, repair.ToolName), agenttest.Want{Role: "user", Kind: "text", Text: "MARKER-NEW"})
	if len(wants) < 7 {
		t.Fatalf("the gemini session is too small to prove anything: %d items", len(wants))
	}
	agenttest.AssertInOrder(t, turns[0].Items, wants)
}
