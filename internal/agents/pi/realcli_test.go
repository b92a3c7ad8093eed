package pi

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

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

var foreignWants = []agenttest.Want{
	{Role: "user", Kind: "text", Text: "MARKER-U1"},
	// Foreign thinking arrives as text, kept apart from the answer.
	{Role: "assistant", Kind: "text", Text: "MARKER-THINK0\n\nI'll list the directory. MARKER-A1"},
	{Role: "assistant", Kind: "tool_call", Tool: "Bash", ID: "toolu_01"},
	{Role: "tool", Kind: "tool_result", Text: "MARKER-TR", ID: "toolu_01"},
	{Role: "assistant", Kind: "text", Text: "MARKER-A2"},
	{Role: "user", Kind: "text", Text: "/tmp/MARKER-U2"},
	{Role: "assistant", Kind: "tool_call", Tool: "fs_read_file", ID: "read_file_1"},
	{Role: "tool", Kind: "tool_result", Text: "MARKER-TR2", ID: "read_file_1"},
	{Role: "assistant", Kind: "text", Text: "MARKER-A3"},
	{Role: "user", Kind: "text", Text: "?MARKER-U3"},
	{Role: "assistant", Kind: "tool_call", Tool: "run_shell_command", ID: "run_2"},
	{Role: "tool", Kind: "tool_result", Text: "no result was recorded", ID: "run_2"},
	{Role: "assistant", Kind: "text", Text: "MARKER-A4"},
	{Role: "user", Kind: "text", Text: "MARKER-NEW"},
}

// TestRealPiResumesWrittenSession writes a foreign conversation with the
// Writer and continues it with the real pi, by path and with -c (which finds
// it in pi's sessions folder for the cwd); pi picks the fake model from the
// written model_change. It then checks the recorded request and reads the
// file pi appended to.
func TestRealPiResumesWrittenSession(t *testing.T) {
	ways := []agenttest.ResumeWay{
		{Name: "session-path", Args: func(w agents.Written) []string { return []string{"--session", w.Path} }},
		{Name: "continue", Args: func(agents.Written) []string { return []string{"-c"} }},
	}
	write := func(home, cwd, _ string) (agents.Written, error) {
		return Writer{}.Write(agents.Target{Home: home, Cwd: cwd, SessionID: "e2e",
			Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}, foreignConversation())
	}
	agenttest.ResumeWritten(t, "pi", agenttest.Bin(t, "pi"), []string{"work", "proj"}, ways, write,
		[]string{"-p", "--mode", "json", "what did we do? MARKER-NEW"}, func(t *testing.T, r agenttest.Resumed) {
			if len(r.Turns) != 1 {
				t.Fatalf("%d turns sent, want 1", len(r.Turns))
			}
			if r.Turns[0].API != fakemodel.Chat || r.Turns[0].Model != agenttest.FakeModel {
				t.Fatalf("turn went to %s model %q", r.Turns[0].API, r.Turns[0].Model)
			}
			agenttest.AssertInOrder(t, r.Items, foreignWants)
			agenttest.AssertNoneHolds(t, r.Items, "MARKER-INTERNAL", "MARKER-NOTICE")

			// pi appended its turn to the written file; the reader sees it all.
			msgs, err := Reader{}.Read(r.Written.Path)
			if err != nil {
				t.Fatal(err)
			}
			agenttest.CheckWellFormed(t, msgs)
			all := agenttest.Texts(msgs)
			agenttest.AssertHoldsAll(t, "reading the continued session", all,
				"MARKER-U1", "MARKER-A1", "MARKER-THINK", "/tmp/MARKER-U2", "?MARKER-U3", "MARKER-A4", "MARKER-NEW", "FAKE-ANSWER")
		})
}

// TestRealPiSessionReads runs a real pi session with a real bash tool call
// and checks that the reader gets every turn out of the file pi wrote.
func TestRealPiSessionReads(t *testing.T) {
	s := agenttest.NewSandbox(t, "pi", nil, "work", "proj")
	// A --session path that does not exist yet is where pi creates it.
	path := filepath.Join(t.TempDir(), "real.jsonl")
	ctx := agenttest.Deadline(t, 4*time.Minute)
	model := []string{"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel}
	s.Run(t, ctx, append(model, "--session", path, "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now")...)
	s.Run(t, ctx, append(model, "--session", path, "-p", "second turn MARKER-T2")...)

	msgs, skipped, err := Reader{}.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	agenttest.CheckOwnSession(t, msgs, skipped,
		"user:please TOOLCALL", `call:bash{"command":"echo MARKER-SHELL"`, "result:MARKER-SHELL", "assistant:FAKE: tool said MARKER-SHELL", "user:second turn MARKER-T2", "assistant:FAKE-ANSWER")
}
