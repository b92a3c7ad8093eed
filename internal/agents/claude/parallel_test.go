package claude_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestParallelToolResultsWithRealClaude: the real Claude Code runs three
// tool calls from one answer; every call and every result is read back from
// the session it wrote, each result paired with its call. Claude writes a
// result per branch, so following only the chain from the last record kept
// one of the three results.
func TestParallelToolResultsWithRealClaude(t *testing.T) {
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "claude", fake.URL)
	cwd := filepath.Join(home, "work")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	fake.Enqueue(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]any{"command": "echo parallel-ok"}}, Parallel: 3})
	fake.Enqueue(fakemodel.Reply{Text: "all three ran MARKER-DONE"})
	const sid = "3f1e2d4c-5b6a-4789-8a9b-0c1d2e3f4a5b"
	prompt := "run it three times MARKER-P"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	agenttest.MustRunInput(t, ctx, agenttest.Bin(t, "claude"), []string{"-p", "--session-id", sid, "--allowedTools", "Bash"}, env, cwd, &prompt)

	msgs, _, err := claude.ReadFile(filepath.Join(claude.ProjectDir(agenttest.NativeHome(home, "claude"), cwd), sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	calls, results := map[string]bool{}, map[string]int{}
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			calls[m.ToolCall.ID] = true
		case transcript.KindToolResult:
			if !calls[m.ToolResult.CallID] {
				t.Fatalf("result for %s comes before its call or has none", m.ToolResult.CallID)
			}
			results[m.ToolResult.CallID]++
		}
	}
	if len(calls) != 3 || len(results) != 3 {
		t.Fatalf("read %d calls and %d results, want 3 and 3:\n%s", len(calls), len(results), kindsOf(msgs))
	}
	for id, n := range results {
		if n != 1 {
			t.Fatalf("result for %s read %d times", id, n)
		}
	}
	if last := msgs[len(msgs)-1]; last.Kind != transcript.KindAssistant || last.Text != "all three ran MARKER-DONE" {
		t.Fatalf("last message %v %q", last.Kind, last.Text)
	}
}

func kindsOf(msgs []transcript.Message) string {
	s := ""
	for _, m := range msgs {
		s += fmt.Sprintf("%v ", m.Kind)
	}
	return s
}
