package codex

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// numberedOutput is about size bytes of shell output whose every line names
// its number, so a missing middle shows as missing lines.
func numberedOutput(size int) string {
	var b strings.Builder
	for i := 1; b.Len() < size; i++ {
		fmt.Fprintf(&b, "LARGE-LINE %05d of a long build log\n", i)
	}
	return b.String()
}

// A 50 KB shell output in a conversation far below Codex's caps reaches the
// model whole when the real Codex resumes the rollout cast wrote. How much
// of a long output Codex sends is its own truncation policy (per model, or
// tool_output_token_limit in the user's config; for an unknown model like the
// fake it keeps ~10 KB, of outputs it ran itself too); with a limit that
// holds 50 KB, nothing cast wrote may be missing.
func TestE2ELargeOutputReachesModelWhole(t *testing.T) {
	fake, bin, codexHome, env, cwd := newCodex(t)
	big := numberedOutput(50 * 1024)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: "LARGE-U1: run the build and show me the log", Agent: "claude"},
		{Kind: transcript.KindToolCall, Agent: "claude", ToolCall: &transcript.ToolCall{ID: "toolu_LARGE1", Name: "Bash", Input: `{"command":"make build"}`}},
		{Kind: transcript.KindToolResult, Agent: "claude", ToolResult: &transcript.ToolResult{CallID: "toolu_LARGE1", Output: big, ExitCode: i32(0)}},
		{Kind: transcript.KindAssistant, Text: "LARGE-A1: the build passed", Agent: "claude"},
	}
	for i := range msgs {
		msgs[i].Seq, msgs[i].Time = int64(i+1), at.Add(time.Duration(i)*time.Second)
	}
	w, err := Writer{}.Write(agents.Target{Home: codexHome, Cwd: cwd, SessionID: "ses-e2e-large", Model: agenttest.FakeModel}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if w.Omitted != 0 {
		t.Fatalf("writer left out %d messages of a conversation far below the caps", w.Omitted)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "--json", "-c", "tool_output_token_limit=40000", "resume", w.NativeID, "LARGE-NEW: anything odd?"}, env, cwd)
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatalf("no model request; stderr:\n%s", res.Stderr)
	}
	var got string
	for _, it := range turns[0].Items {
		if it.Kind == fakemodel.KindToolResult && it.ToolCallID == "toolu_LARGE1" {
			got = it.Text
		}
	}
	if !strings.HasSuffix(got, big) {
		missing := 0
		for _, l := range strings.Split(strings.TrimSuffix(big, "\n"), "\n") {
			if !strings.Contains(got, l+"\n") {
				missing++
			}
		}
		t.Fatalf("the model got %d of %d output bytes (%d lines missing); head %.120q tail %q",
			len(got), len(big), missing, got, got[max(0, len(got)-120):])
	}
}
