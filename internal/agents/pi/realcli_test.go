package pi

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

// foreignConversation is what other agents left in the neutral copy: a
// Claude Bash call, Gemini thinking and a call with a dotted name, an
// orphan call, a notice and an internal row.
func foreignConversation() []transcript.Message {
	as := func(agent, model string, m transcript.Message) transcript.Message {
		m.Agent, m.Model = agent, model
		return m
	}
	return []transcript.Message{
		user("Please look at the files here. MARKER-U1"),
		as("claude", "claude-sonnet-4-5", think("List first. MARKER-THINK0")),
		as("claude", "claude-sonnet-4-5", asst("I'll list the directory. MARKER-A1")),
		as("claude", "claude-sonnet-4-5", call("toolu_01", "Bash", `{"command":"ls"}`)),
		as("claude", "claude-sonnet-4-5", result("toolu_01", "notes.txt README.md MARKER-TR", false)),
		as("claude", "claude-sonnet-4-5", asst("There are two files. MARKER-A2")),
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "claude -> gemini MARKER-NOTICE"},
		{Kind: transcript.KindInternal, Text: "MARKER-INTERNAL"},
		user("/tmp/MARKER-U2 holds the logs"),
		as("gemini", "gemini-3.8-flash", think("The user wants the logs. MARKER-THINK")),
		as("gemini", "gemini-3.8-flash", call("read_file_1", "fs.read:file", `{"path":"/tmp/log"}`)),
		as("gemini", "gemini-3.8-flash", result("read_file_1", "log line MARKER-TR2", false)),
		as("gemini", "gemini-3.8-flash", asst("The log says hi. MARKER-A3")),
		user("?MARKER-U3 run it again"),
		as("gemini", "gemini-3.8-flash", call("run_2", "run_shell_command", `{"command":"make"}`)), // interrupted
		as("gemini", "gemini-3.8-flash", asst("Interrupted. MARKER-A4")),
	}
}

var foreignWants = []want{
	{role: "user", kind: "text", text: "MARKER-U1"},
	// Foreign thinking arrives as text, kept apart from the answer.
	{role: "assistant", kind: "text", text: "MARKER-THINK0\n\nI'll list the directory. MARKER-A1"},
	{role: "assistant", kind: "tool_call", tool: "Bash", id: "toolu_01"},
	{role: "tool", kind: "tool_result", text: "MARKER-TR", id: "toolu_01"},
	{role: "assistant", kind: "text", text: "MARKER-A2"},
	{role: "user", kind: "text", text: "/tmp/MARKER-U2"},
	{role: "assistant", kind: "tool_call", tool: "fs_read_file", id: "read_file_1"},
	{role: "tool", kind: "tool_result", text: "MARKER-TR2", id: "read_file_1"},
	{role: "assistant", kind: "text", text: "MARKER-A3"},
	{role: "user", kind: "text", text: "?MARKER-U3"},
	{role: "assistant", kind: "tool_call", tool: "run_shell_command", id: "run_2"},
	{role: "tool", kind: "tool_result", text: "no result was recorded", id: "run_2"},
	{role: "assistant", kind: "text", text: "MARKER-A4"},
	{role: "user", kind: "text", text: "MARKER-NEW"},
}

// TestRealPiResumesWrittenSession writes a foreign conversation with the
// Writer and continues it with the real pi, by path and with -c (which finds
// it in pi's sessions folder for the cwd); pi picks the fake model from the
// written model_change. It then checks the recorded request and reads the
// file pi appended to.
func TestRealPiResumesWrittenSession(t *testing.T) {
	bin := agenttest.Bin(t, "pi")
	tests := []struct {
		name string
		args func(w agents.Written) []string
	}{
		{"session-path", func(w agents.Written) []string { return []string{"--session", w.Path} }},
		{"continue", func(agents.Written) []string { return []string{"-c"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakemodel.Start(t)
			home, env := agenttest.Env(t, "pi", fake.URL)
			cwd := filepath.Join(home, "work", "proj")
			if err := os.MkdirAll(cwd, 0o755); err != nil {
				t.Fatal(err)
			}
			tg := agents.Target{Home: agenttest.NativeHome(home, "pi"), Cwd: cwd, SessionID: "e2e",
				Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}
			w, err := Writer{}.Write(tg, foreignConversation())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			args := append(tt.args(w), "-p", "--mode", "json", "what did we do? MARKER-NEW")
			res := agenttest.MustRun(t, ctx, bin, args, env, cwd)
			if !strings.Contains(res.Stdout, "FAKE-ANSWER") {
				t.Fatalf("no fake answer in the json events:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
			}
			turns := fake.Turns()
			if len(turns) != 1 {
				t.Fatalf("%d turns sent, want 1", len(turns))
			}
			if turns[0].API != fakemodel.Chat || turns[0].Model != agenttest.FakeModel {
				t.Fatalf("turn went to %s model %q", turns[0].API, turns[0].Model)
			}
			items := turns[0].Items
			assertInOrder(t, items, foreignWants)
			for _, it := range items {
				if strings.Contains(it.Text, "MARKER-INTERNAL") || strings.Contains(it.Text, "MARKER-NOTICE") {
					t.Fatalf("internal row or notice reached the model: %s", it)
				}
			}

			// pi appended its turn to the written file; the reader sees it all.
			msgs, err := Reader{}.Read(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckWellFormed(t, msgs)
			var texts []string
			for _, m := range msgs {
				texts = append(texts, m.Text)
			}
			all := strings.Join(texts, "\n")
			for _, s := range []string{"MARKER-U1", "MARKER-A1", "MARKER-THINK", "/tmp/MARKER-U2", "?MARKER-U3", "MARKER-A4", "MARKER-NEW", "FAKE-ANSWER"} {
				if !strings.Contains(all, s) {
					t.Errorf("reading the continued session lost %q", s)
				}
			}
		})
	}
}

// TestRealPiSessionReads runs a real pi session with a real bash tool call
// and checks that the reader gets every turn out of the file pi wrote.
func TestRealPiSessionReads(t *testing.T) {
	bin := agenttest.Bin(t, "pi")
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "pi", fake.URL)
	cwd := filepath.Join(home, "work", "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	// A --session path that does not exist yet is where pi creates it.
	path := filepath.Join(t.TempDir(), "real.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	model := []string{"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel}
	agenttest.MustRun(t, ctx, bin, append(model, "--session", path, "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now"), env, cwd)
	agenttest.MustRun(t, ctx, bin, append(model, "--session", path, "-p", "second turn MARKER-T2"), env, cwd)

	msgs, skipped, err := Reader{}.ReadReport(path)
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
			got = append(got, "call:"+m.ToolCall.Name+m.ToolCall.Input)
		case transcript.KindToolResult:
			got = append(got, "result:"+m.ToolResult.Output)
		case transcript.KindUser, transcript.KindAssistant:
			got = append(got, m.Kind.String()+":"+m.Text)
		}
	}
	joined := strings.Join(got, "\n")
	for _, s := range []string{"user:please TOOLCALL", `call:bash{"command":"echo MARKER-SHELL"`, "result:MARKER-SHELL", "assistant:FAKE: tool said MARKER-SHELL", "user:second turn MARKER-T2", "assistant:FAKE-ANSWER"} {
		if !strings.Contains(joined, s) {
			t.Errorf("reader lost %q; got:\n%s", s, joined)
		}
	}
}
