package gemini

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

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
func foreignWants(escaped bool) []agenttest.Want {
	u2, u3 := "/tmp/MARKER-U2", "?MARKER-U3"
	if escaped {
		u2, u3 = `\/tmp/MARKER-U2`, `\?MARKER-U3`
	}
	return []agenttest.Want{
		{Role: "user", Kind: "text", Text: "MARKER-U1"},
		{Role: "assistant", Kind: "text", Text: "MARKER-A1"},
		{Role: "assistant", Kind: "tool_call", Tool: "Bash", ID: "toolu_01"},
		{Role: "tool", Kind: "tool_result", Text: "MARKER-TR", ID: "toolu_01"},
		{Role: "assistant", Kind: "text", Text: "MARKER-A2"},
		{Role: "user", Kind: "text", Text: u2},
		{Role: "assistant", Kind: "text", Text: "MARKER-A3"},
		{Role: "user", Kind: "text", Text: u3},
		{Role: "assistant", Kind: "tool_call", Tool: "mcp__fs__read", ID: "toolu_02"},
		{Role: "tool", Kind: "tool_result", Text: "no result was recorded", ID: "toolu_02"},
		{Role: "assistant", Kind: "text", Text: "MARKER-A4"},
		{Role: "user", Kind: "text", Text: "MARKER-NEW"},
	}
}

// TestRealGeminiResumesWrittenSession writes a foreign conversation with
// the Writer and resumes it with the real Gemini CLI, both ways the CLI
// offers, then checks the recorded request.
func TestRealGeminiResumesWrittenSession(t *testing.T) {
	ways := []agenttest.ResumeWay{
		{Name: "session-file", Args: func(w agents.Written) []string { return []string{"--session-file", w.Path} }},
		{Name: "resume", Args: func(w agents.Written) []string { return []string{"--resume", w.NativeID} }},
	}
	write := func(home, cwd, way string) (agents.Written, error) {
		return Writer{}.Write(agents.Target{Home: home, Cwd: cwd, SessionID: "e2e-" + way}, foreignConversation())
	}
	agenttest.ResumeWritten(t, "gemini", agenttest.Bin(t, "gemini"), []string{"work", "Cast Project"}, ways, write,
		[]string{"-p", "what did we do? MARKER-NEW"}, func(t *testing.T, r agenttest.Resumed) {
			agenttest.AssertInOrder(t, r.Items, foreignWants(true))
			agenttest.AssertNoneHolds(t, r.Items, "MARKER-INTERNAL", "claude -> gemini")

			// --resume appends to the written file; --session-file imports it
			// into a new session in the same chats folder. Either way, reading
			// the file the CLI continued gives the whole conversation with
			// escapes undone.
			files, _ := filepath.Glob(filepath.Join(filepath.Dir(r.Written.Path), "session-*.jsonl"))
			best := ""
			for _, f := range files {
				msgs, err := Reader{}.Read(f)
				if err != nil {
					continue
				}
				agenttest.CheckWellFormed(t, msgs)
				all := agenttest.Texts(msgs)
				if strings.Contains(all, "MARKER-NEW") {
					best = all
				}
			}
			agenttest.AssertHoldsAll(t, "reading the continued session", best,
				"MARKER-U1", "MARKER-A1", "\n/tmp/MARKER-U2", "\n?MARKER-U3", "MARKER-A4", "MARKER-NEW", "FAKE-ANSWER")
		})
}

// TestRealGeminiSessionReads runs a real Gemini CLI session with a real shell
// tool call and checks that the reader gets every turn out of the file the
// CLI wrote itself.
func TestRealGeminiSessionReads(t *testing.T) {
	s := agenttest.NewSandbox(t, "gemini", nil, "work", "proj")
	ctx := agenttest.Deadline(t, 4*time.Minute)
	sid := "6f1c1c38-1c3e-4f8e-9d7e-0a0b0c0d0e0f"
	s.Run(t, ctx, "--session-id", sid, "--yolo", "-p", "please TOOLCALL CMD[echo MARKER-SHELL] now")
	s.Run(t, ctx, "--resume", sid, "-p", "second turn MARKER-T2")

	files, _ := filepath.Glob(filepath.Join(s.Native, "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
	// A resume also leaves a stray file with only a header and the CLI's
	// context when the minute changed; the conversation is the largest.
	msgs, skipped, err := Reader{}.ReadReport(agenttest.Largest(t, files))
	if err != nil {
		t.Fatal(err)
	}
	joined := agenttest.CheckOwnSession(t, msgs, skipped,
		"user:please TOOLCALL", "call:run_shell_command", "result:<untrusted_context>\nOutput: MARKER-SHELL", "assistant:FAKE: tool said", "user:second turn MARKER-T2", "assistant:FAKE-ANSWER")
	if c := strings.Count(joined, "call:run_shell_command"); c != 1 {
		t.Errorf("%d tool calls read, want 1:\n%s", c, joined)
	}
}

// TestRealGeminiAnswerIsTheInterruptedPlaceholder has the model answer
// with exactly the text of the turn Gemini makes up to close an
// interrupted one, then resumes the session (the CLI writes it anew: new
// ids, no models): the answer is read, once, both times. It was left out
// as the CLI's own turn.
func TestRealGeminiAnswerIsTheInterruptedPlaceholder(t *testing.T) {
	s := agenttest.NewSandbox(t, "gemini", nil, "work", "proj")
	ctx := agenttest.Deadline(t, 4*time.Minute)
	sid := "7a2d2d49-2d5f-4f9f-8e1f-1b1c1d1e1f10"
	s.Fake.Enqueue(fakemodel.Reply{Text: interruptedPlaceholder})
	s.Run(t, ctx, "--session-id", sid, "-p", "say the marker MARKER-T1")
	want := "assistant:" + interruptedPlaceholder
	for turn, args := range [][]string{nil, {"--resume", sid, "-p", "second turn MARKER-T2"}} {
		if args != nil {
			s.Run(t, ctx, args...)
		}
		files, _ := filepath.Glob(filepath.Join(s.Native, "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
		msgs, skipped, err := Reader{}.ReadReport(agenttest.Largest(t, files))
		if err != nil {
			t.Fatal(err)
		}
		joined := agenttest.CheckOwnSession(t, msgs, skipped, "user:say the marker MARKER-T1", want)
		if c := strings.Count(joined, want); c != 1 {
			t.Errorf("after turn %d: the answer read %d times, want 1:\n%s", turn+1, c, joined)
		}
	}
}
