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

// want matches one item the model must receive.
type want struct {
	kind string // fakemodel.Kind*
	role string
	has  string // substring of the text, or of name+input for a tool call
}

func (w want) match(it fakemodel.Item) bool {
	if it.Kind != w.kind || (w.role != "" && it.Role != w.role) {
		return false
	}
	s := it.Text
	if it.Kind == fakemodel.KindToolCall {
		s = it.ToolName + " " + it.ToolInput
	}
	return strings.Contains(s, w.has)
}

func exit(n int32) *int32 { return &n }

// TestResumeWithRealClaude writes transcripts with the Writer and resumes
// them with the real, pinned `claude -p --resume` against the fake model:
// the request Claude sends must hold every turn, in order, with each tool
// result paired to its call.
func TestResumeWithRealClaude(t *testing.T) {
	conversation := []transcript.Message{
		{Kind: transcript.KindUser, Text: "Please look at the files here. MARKER-U1", Agent: "claude"},
		{Kind: transcript.KindThinking, Text: "MARKER-THINK", Agent: "claude", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindAssistant, Text: "I'll list the directory. MARKER-A1", Agent: "claude", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "toolu_01", Name: "Bash", Input: `{"command":"ls"}`}, Agent: "claude"},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "toolu_01", Output: "notes.txt README.md MARKER-TR1", ExitCode: exit(0)}},
		{Kind: transcript.KindAssistant, Text: "There are two files. MARKER-A2", Agent: "claude", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindInternal, Text: "MARKER-INTERNAL server bookkeeping"},
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "Switched to codex. MARKER-NOTICE"},
		{Kind: transcript.KindUser, Text: "Run the tests. MARKER-U3", Agent: "codex"},
		// Codex's own shell tool, as the codex reader produces it.
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "call_Xy1", Name: "exec_command", Input: `{"cmd":"go test ./...","workdir":"/srv/app"}`}, Agent: "codex", Model: "gpt-5-codex"},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "call_Xy1", Output: "FAIL pkg MARKER-TR2", ExitCode: exit(1), IsError: true}, Agent: "codex"},
		{Kind: transcript.KindAssistant, Text: "One test fails. MARKER-A3", Agent: "codex", Model: "gpt-5-codex"},
	}
	full := []want{
		{fakemodel.KindText, "user", "MARKER-U1"},
		{fakemodel.KindText, "assistant", "MARKER-A1"},
		{fakemodel.KindToolCall, "assistant", `Bash {"command":"ls"}`},
		{fakemodel.KindToolResult, "user", "MARKER-TR1"},
		{fakemodel.KindText, "assistant", "MARKER-A2"},
		{fakemodel.KindText, "user", "MARKER-NOTICE"},
		{fakemodel.KindText, "user", "MARKER-U3"},
		{fakemodel.KindToolCall, "assistant", `Bash {"command":"cd /srv/app && go test ./..."}`},
		{fakemodel.KindToolResult, "user", "Exit code 1\nFAIL pkg MARKER-TR2"},
		{fakemodel.KindText, "assistant", "MARKER-A3"},
		{fakemodel.KindText, "user", "MARKER-NEW"},
	}

	// A long session trimmed with small thresholds: the early instruction
	// and the note with the cast read range must reach the model.
	var long []transcript.Message
	long = append(long, transcript.Message{Kind: transcript.KindUser, Text: "Always answer in French. MARKER-EARLY"})
	for i := range 20 {
		long = append(long, transcript.Message{Kind: transcript.KindAssistant, Text: "filler answer " + strings.Repeat("f", 200)})
		if i == 5 {
			long = append(long, transcript.Message{Kind: transcript.KindAssistant, Text: "MARKER-CUT this is omitted"})
		}
	}
	long = append(long, transcript.Message{Kind: transcript.KindUser, Text: "And now? MARKER-LATE"})
	long = append(long, transcript.Message{Kind: transcript.KindAssistant, Text: "Bien sûr. MARKER-LAST"})

	tests := []struct {
		name   string
		writer claude.Writer
		msgs   []transcript.Message
		want   []want
		absent []string
		model  string
	}{
		{"multi-turn with a foreign tool call", claude.Writer{}, conversation, full,
			[]string{"MARKER-INTERNAL", "MARKER-THINK"}, "claude-sonnet-4-5"},
		{"orphans repaired", claude.Writer{}, []transcript.Message{
			{Kind: transcript.KindUser, Text: "MARKER-O1"},
			{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "c1", Name: "bash", Input: `{"command":"sleep 100"}`}},
			{Kind: transcript.KindAssistant, Text: "MARKER-O2"},
			{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "zz", Output: "MARKER-ORPHAN-OUT"}},
			{Kind: transcript.KindAssistant, Text: "MARKER-O3"},
		}, []want{
			{fakemodel.KindText, "user", "MARKER-O1"},
			{fakemodel.KindToolCall, "assistant", "sleep 100"},
			{fakemodel.KindToolResult, "user", "no result was recorded"},
			{fakemodel.KindText, "assistant", "MARKER-O2"},
			{fakemodel.KindText, "user", "MARKER-ORPHAN-OUT"},
			{fakemodel.KindText, "assistant", "MARKER-O3"},
			{fakemodel.KindText, "user", "MARKER-NEW"},
		}, nil, ""},
		{"trimmed", claude.Writer{TrimAbove: 600, KeepTail: 300}, long, []want{
			{fakemodel.KindText, "user", "MARKER-EARLY"},
			{fakemodel.KindText, "user", "`cast read ses-e2e 2:"},
			{fakemodel.KindText, "user", "MARKER-LATE"},
			{fakemodel.KindText, "assistant", "MARKER-LAST"},
			{fakemodel.KindText, "user", "MARKER-NEW"},
		}, []string{"MARKER-CUT"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			fake.SetStrict(true) // pairing must be what a real API accepts
			bin := agenttest.Bin(t, "claude")
			home, env := agenttest.Env(t, "claude", fake.URL)
			cwd := t.TempDir()
			w, err := tc.writer.Write(agents.Target{
				Home: agenttest.NativeHome(home, "claude"), Cwd: cwd, SessionID: "ses-e2e", Model: tc.model,
			}, tc.msgs)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(w.Path, filepath.Join(home, ".claude", "projects")) {
				t.Fatalf("written outside the isolated CLAUDE_CONFIG_DIR: %s", w.Path)
			}
			res := agenttest.MustRun(t, context.Background(), bin,
				[]string{"-p", "what did we do? MARKER-NEW", "--resume", w.NativeID}, env, cwd)
			turns := fake.Turns()
			if len(turns) == 0 {
				t.Fatalf("claude sent no request\nstdout: %s\nstderr: %s", res.Stdout, res.Stderr)
			}
			req := turns[len(turns)-1]
			items := req.Items
			t.Logf("the model received:\n%s", dump(items))
			at := 0
			for _, wnt := range tc.want {
				found := false
				for ; at < len(items); at++ {
					if wnt.match(items[at]) {
						found, at = true, at+1
						break
					}
				}
				if !found {
					t.Fatalf("the model did not receive %+v (in order); it got:\n%s", wnt, dump(items))
				}
			}
			// Every tool result must answer a call the model saw.
			calls := map[string]bool{}
			for _, it := range items {
				switch it.Kind {
				case fakemodel.KindToolCall:
					calls[it.ToolCallID] = true
				case fakemodel.KindToolResult:
					if !calls[it.ToolCallID] {
						t.Errorf("tool result %s has no call before it", it.ToolCallID)
					}
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(string(req.Body), s) {
					t.Errorf("%s reached the model", s)
				}
			}
			if tc.model != "" && req.Model != tc.model {
				t.Errorf("resumed with model %q, want %q from the transcript", req.Model, tc.model)
			}
			if !strings.Contains(res.Stdout, "MARKER-NEW") {
				t.Errorf("claude did not print the fake's answer: %s", res.Stdout)
			}
		})
	}
}

func dump(items []fakemodel.Item) string {
	var b strings.Builder
	for _, it := range items {
		s := it.String()
		if len(s) > 160 {
			s = s[:160] + "..."
		}
		b.WriteString("  " + s + "\n")
	}
	return b.String()
}
