package claude_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestRealClaudeRoundTrip: a session the real CLI wrote (two turns, a real
// shell tool call) is read into neutral messages, written for a fresh
// CLAUDE_CONFIG_DIR and resumed there; the model must see every turn again.
func TestRealClaudeRoundTrip(t *testing.T) {
	ctx := context.Background()
	bin := agenttest.Bin(t, "claude")
	const sid = "3f1d1c52-8f0e-4b8e-9d55-0d8a7f3c2b11"

	// 1. The real CLI produces a native session.
	src := fakemodel.Start(t)
	src.SetStrict(true) // pairing must be what a real API accepts
	home, env := agenttest.Env(t, "claude", src.URL)
	cwd := t.TempDir()
	agenttest.MustRun(t, ctx, bin, []string{"-p", "please TOOLCALL now CMD[echo tool-ran-ok] MARKER-P1",
		"--session-id", sid, "--allowedTools", "Bash"}, env, cwd)
	agenttest.MustRun(t, ctx, bin, []string{"-p", "second turn MARKER-P2", "--resume", sid}, env, cwd)
	native := filepath.Join(claude.ProjectDir(agenttest.NativeHome(home, "claude"), cwd), sid+".jsonl")

	// 2. Read it. Everything the pinned CLI writes is known: an import
	// reports nothing skipped (a new version's records would show up here).
	msgs, skipped, err := claude.Reader{}.ReadReport(native)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) > 0 {
		t.Errorf("the reader does not know parts of the pinned CLI's session: %v", skipped)
	}
	var got []string
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			got = append(got, "call:"+m.ToolCall.Name)
		case transcript.KindToolResult:
			ec := "nil"
			if m.ToolResult.ExitCode != nil {
				ec = string(rune('0' + *m.ToolResult.ExitCode))
			}
			got = append(got, "result:"+strings.TrimSpace(m.ToolResult.Output)+":exit="+ec)
		default:
			got = append(got, m.Kind.String()+":"+m.Text)
		}
	}
	wantRead := []string{"user:please TOOLCALL now", "call:Bash", "result:tool-ran-ok:exit=0",
		"assistant:FAKE: tool said tool-ran-ok", "user:second turn MARKER-P2", "assistant:FAKE-ANSWER"}
	joined := strings.Join(got, "\n")
	rest := joined
	for _, w := range wantRead {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("read from the real CLI's file: missing %q (in order) in:\n%s", w, joined)
		}
		rest = rest[i+len(w):]
	}

	// 3. Write for a fresh home and resume with the real CLI again.
	dst := fakemodel.Start(t)
	dst.SetStrict(true) // pairing must be what a real API accepts
	home2, env2 := agenttest.Env(t, "claude", dst.URL)
	cwd2 := t.TempDir()
	w, err := claude.Writer{}.Write(agents.Target{Home: agenttest.NativeHome(home2, "claude"), Cwd: cwd2, SessionID: "ses-rt"}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	agenttest.MustRun(t, ctx, bin, []string{"-p", "third MARKER-P3", "--resume", w.NativeID}, env2, cwd2)
	turns := dst.Turns()
	if len(turns) != 1 {
		t.Fatalf("%d requests, want 1", len(turns))
	}
	items := turns[0].Items
	order := []want{
		{fakemodel.KindText, "user", "MARKER-P1"},
		{fakemodel.KindToolCall, "assistant", "echo tool-ran-ok"},
		{fakemodel.KindToolResult, "user", "tool-ran-ok"},
		{fakemodel.KindText, "assistant", "FAKE: tool said tool-ran-ok"},
		{fakemodel.KindText, "user", "MARKER-P2"},
		{fakemodel.KindText, "assistant", "FAKE-ANSWER"},
		{fakemodel.KindText, "user", "MARKER-P3"},
	}
	at := 0
	for _, wnt := range order {
		for ; at < len(items) && !wnt.match(items[at]); at++ {
		}
		if at == len(items) {
			t.Fatalf("the model did not receive %+v (in order); it got:\n%s", wnt, dump(items))
		}
		at++
	}

	// 4. The CLI appended its new turn to the file cast wrote; reading it
	// back (how cast syncs a running agent) gives the old turns plus the new.
	after, err := claude.Reader{}.Read(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(msgs)+2 {
		t.Fatalf("read %d messages after the resume, want %d + the new user turn and answer", len(after), len(msgs))
	}
	if u, a := after[len(after)-2], after[len(after)-1]; u.Kind != transcript.KindUser || u.Text != "third MARKER-P3" ||
		a.Kind != transcript.KindAssistant || !strings.Contains(a.Text, "FAKE-ANSWER") {
		t.Errorf("new turn read back as %+v / %+v", u, a)
	}
}
