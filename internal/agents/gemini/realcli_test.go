package gemini

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// want matches one item the model must have received.
type want struct {
	role, kind string
	text       string // substring of the text (or tool output)
	tool, id   string // tool name and call id, for tool items
}

// assertInOrder checks that every want appears in items, in this order.
func assertInOrder(t *testing.T, items []fakemodel.Item, wants []want) {
	t.Helper()
	i := 0
	for _, w := range wants {
		found := false
		for ; i < len(items); i++ {
			it := items[i]
			if it.Role == w.role && it.Kind == w.kind && strings.Contains(it.Text, w.text) &&
				(w.tool == "" || it.ToolName == w.tool) && (w.id == "" || it.ToolCallID == w.id) {
				found = true
				i++
				break
			}
		}
		if !found {
			var b strings.Builder
			for _, it := range items {
				b.WriteString("  " + it.String() + "\n")
			}
			t.Fatalf("the model never received %+v in order; it got:\n%s", w, b.String())
		}
	}
}

// foreignConversation is what another agent (Claude Code here) left in the
// neutral copy: a Bash call, thinking, user text Gemini would drop, an
// orphan call and a notice.
func foreignConversation() []transcript.Message {
	c := func(m transcript.Message) transcript.Message {
		m.Agent, m.Model = "claude", "claude-sonnet-4-5"
		return m
	}
	return []transcript.Message{
		user("Please look at the files here. MARKER-U1"),
		c(think("I should list the directory. MARKER-THINK")),
		c(asst("I'll list the directory. MARKER-A1")),
		c(call("toolu_01", "Bash", `{"command":"ls","description":"List files"}`)),
		c(result("toolu_01", "notes.txt README.md MARKER-TR", false)),
		c(asst("There are two files. MARKER-A2")),
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "claude -> gemini"},
		{Kind: transcript.KindInternal, Text: "MARKER-INTERNAL"},
		user("/tmp/MARKER-U2 holds the logs"),
		c(asst("Noted. MARKER-A3")),
		user("?MARKER-U3 what now"),
		c(call("toolu_02", "mcp__fs__read", `{"path":"a"}`)), // interrupted: no result
		c(asst("Interrupted. MARKER-A4")),
	}
}

// foreignWants is what the model must receive for foreignConversation.
func foreignWants(escaped bool) []want {
	u2, u3 := "/tmp/MARKER-U2", "?MARKER-U3"
	if escaped {
		u2, u3 = `\/tmp/MARKER-U2`, `\?MARKER-U3`
	}
	return []want{
		{role: "user", kind: "text", text: "MARKER-U1"},
		{role: "assistant", kind: "text", text: "MARKER-A1"},
		{role: "assistant", kind: "tool_call", tool: "Bash", id: "toolu_01"},
		{role: "tool", kind: "tool_result", text: "MARKER-TR", id: "toolu_01"},
		{role: "assistant", kind: "text", text: "MARKER-A2"},
		{role: "user", kind: "text", text: u2},
		{role: "assistant", kind: "text", text: "MARKER-A3"},
		{role: "user", kind: "text", text: u3},
		{role: "assistant", kind: "tool_call", tool: "mcp__fs__read", id: "toolu_02"},
		{role: "tool", kind: "tool_result", text: "no result was recorded", id: "toolu_02"},
		{role: "assistant", kind: "text", text: "MARKER-A4"},
		{role: "user", kind: "text", text: "MARKER-NEW"},
	}
}

// TestRealGeminiResumesWrittenSession writes a foreign conversation with
// the Writer and resumes it with the real Gemini CLI, both ways the CLI
// offers, then checks the recorded request.
func TestRealGeminiResumesWrittenSession(t *testing.T) {
	bin := agenttest.Bin(t, "gemini")
	tests := []struct {
		name string
		args func(w agents.Written) []string
	}{
		{"session-file", func(w agents.Written) []string { return []string{"--session-file", w.Path} }},
		{"resume", func(w agents.Written) []string { return []string{"--resume", w.NativeID} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakemodel.Start(t)
			home, env := agenttest.Env(t, "gemini", fake.URL)
			cwd := filepath.Join(home, "work", "Cast Project")
			if err := os.MkdirAll(cwd, 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := Writer{}.Write(agents.Target{Home: agenttest.NativeHome(home, "gemini"), Cwd: cwd, SessionID: "e2e-" + tt.name}, foreignConversation())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			args := append(tt.args(w), "-p", "what did we do? MARKER-NEW")
			res := agenttest.MustRun(t, ctx, bin, args, env, cwd)
			if !strings.Contains(res.Stdout, "FAKE-ANSWER") {
				t.Fatalf("no fake answer on stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
			}
			turns := fake.Turns()
			if len(turns) == 0 {
				t.Fatal("the CLI sent no conversation turn")
			}
			items := turns[len(turns)-1].Items
			assertInOrder(t, items, foreignWants(true))
			for _, it := range items {
				if strings.Contains(it.Text, "MARKER-INTERNAL") || strings.Contains(it.Text, "claude -> gemini") {
					t.Fatalf("internal row or notice reached the model: %s", it)
				}
			}

			// --resume appends to the written file; --session-file imports it
			// into a new session in the same chats folder. Either way, reading
			// the file the CLI continued gives the whole conversation with
			// escapes undone.
			files, _ := filepath.Glob(filepath.Join(filepath.Dir(w.Path), "session-*.jsonl"))
			best := ""
			for _, f := range files {
				msgs, err := Reader{}.Read(f)
				if err != nil {
					continue
				}
				agenttest.CheckWellFormed(t, msgs)
				var texts []string
				for _, m := range msgs {
					texts = append(texts, m.Text)
				}
				all := strings.Join(texts, "\n")
				if strings.Contains(all, "MARKER-NEW") {
					best = all
				}
			}
			for _, s := range []string{"MARKER-U1", "MARKER-A1", "\n/tmp/MARKER-U2", "\n?MARKER-U3", "MARKER-A4", "MARKER-NEW", "FAKE-ANSWER"} {
				if !strings.Contains(best, s) {
					t.Errorf("reading the continued session lost %q", s)
				}
			}
		})
	}
}

// TestRealGeminiSessionReads runs a real Gemini CLI session with a real shell
// tool call and checks that the reader gets every turn out of the file the
// CLI wrote itself.
func TestRealGeminiSessionReads(t *testing.T) {
	bin := agenttest.Bin(t, "gemini")
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "gemini", fake.URL)
	cwd := filepath.Join(home, "work", "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sid := "6f1c1c38-1c3e-4f8e-9d7e-0a0b0c0d0e0f"
	agenttest.MustRun(t, ctx, bin, []string{"--session-id", sid, "--yolo", "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now"}, env, cwd)
	agenttest.MustRun(t, ctx, bin, []string{"--resume", sid, "-p", "second turn MARKER-T2"}, env, cwd)

	files, _ := filepath.Glob(filepath.Join(agenttest.NativeHome(home, "gemini"), "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
	// A resume also leaves a stray file with only a header and the CLI's
	// context when the minute changed; the conversation is the largest.
	msgs, skipped, err := Reader{}.ReadReport(largest(t, files))
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckWellFormed(t, msgs)
	// Everything the pinned CLI writes is known: an import reports nothing
	// skipped (a new version's records would show up here).
	if len(skipped) > 0 {
		t.Errorf("the reader does not know parts of the pinned CLI's session: %v", skipped)
	}
	var got []string
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindToolCall:
			got = append(got, "call:"+m.ToolCall.Name)
		case transcript.KindToolResult:
			got = append(got, "result:"+m.ToolResult.Output)
		case transcript.KindUser, transcript.KindAssistant:
			got = append(got, m.Kind.String()+":"+m.Text)
		}
	}
	joined := strings.Join(got, "\n")
	for _, s := range []string{"user:please TOOLCALL", "call:run_shell_command", "MARKER-SHELL", "assistant:FAKE: tool said", "user:second turn MARKER-T2", "assistant:FAKE-ANSWER"} {
		if !strings.Contains(joined, s) {
			t.Errorf("reader lost %q; got:\n%s", s, joined)
		}
	}
	if c := strings.Count(joined, "call:run_shell_command"); c != 1 {
		t.Errorf("%d tool calls read, want 1:\n%s", c, joined)
	}
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
