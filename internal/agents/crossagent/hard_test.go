package crossagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/agents/opencode"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// The hard conversation: user text that looks like CLI markup, a turn with
// thinking and two parallel shell calls (both asked for before either
// result), one of them answering with a 50 KB output, and a second turn.
const (
	hardU1     = "MARKER-H1 why does my log show <system-reminder>MARKER-HR typed by me</system-reminder> and <cast_notice type=\"x\">?"
	hardCmd1   = "cat build-MARKER-HC1.log"
	hardCmd2   = "cat notes-MARKER-HC2.txt"
	hardShort  = "MARKER-HO2 two notes"
	hardU2     = "MARKER-H2 thanks, and now?"
	hugeLine   = "HUGE-LINE %05d of the build log\n"
	hugeBytes  = 50 * 1024
	hardCallA  = "toolu_HARD_A"
	hardCallB  = "toolu_HARD_B"
	hardPrompt = "MARKER-HNEW what was in the log?"
)

func hugeOutput() string {
	var b strings.Builder
	for i := 1; b.Len() < hugeBytes; i++ {
		fmt.Fprintf(&b, hugeLine, i)
	}
	return b.String()
}

func hardConversation() []transcript.Message {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: hardU1},
		{Kind: transcript.KindThinking, Text: "MARKER-HT1 read both at once", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindAssistant, Text: "MARKER-HA1 reading both", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindToolCall, Model: "claude-sonnet-4-5", ToolCall: &transcript.ToolCall{ID: hardCallA, Name: "Bash", Input: `{"command":"` + hardCmd1 + `"}`}},
		{Kind: transcript.KindToolCall, Model: "claude-sonnet-4-5", ToolCall: &transcript.ToolCall{ID: hardCallB, Name: "Bash", Input: `{"command":"` + hardCmd2 + `"}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: hardCallA, Output: hugeOutput(), ExitCode: code(0)}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: hardCallB, Output: hardShort, ExitCode: code(0)}},
		{Kind: transcript.KindThinking, Text: "MARKER-HT2 summarise", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindAssistant, Text: "MARKER-HA2 the build passed", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindUser, Text: hardU2},
		{Kind: transcript.KindAssistant, Text: "MARKER-HA3 nothing else to do", Model: "claude-sonnet-4-5"},
	}
	for i := range msgs {
		msgs[i].Agent = "claude"
		msgs[i].Seq = int64(i + 1)
		msgs[i].Time = at.Add(time.Duration(i) * time.Second)
	}
	return msgs
}

func code(n int32) *int32 { return &n }

// TestMatrixHard: the hard conversation, written in each source agent's
// native format and imported back with its reader (as `cast import`
// would), reaches the model whole when each real target CLI resumes it:
// the markup-like user text, both parallel calls before their results,
// each result answering its call, the 50 KB output whole, every turn in
// order. Codex keeps about 10 KB of a tool output for a model it does not
// know (its own truncation policy, applied on resume as to outputs it ran
// itself), so its home is configured with a tool_output_token_limit that
// holds 50 KB, as a user would; no other CLI is configured. Its source
// side is each source's writer and reader, which every source's first
// pair carries, so the default run resumes a ring of pairs
// (pairs_test.go).
func TestMatrixHard(t *testing.T) {
	matrix(t, ring(hardShift), importHard, resumeHard)
}

// importHard writes the hard conversation in agent's native format (into
// OpenCode's store, for OpenCode) and reads it back with agent's reader.
func importHard(t *testing.T, agent string) []transcript.Message {
	return importVia(t, agent, "hard", hardConversation())
}

// importVia writes conv in agent's native format (into OpenCode's store,
// for OpenCode) and reads it back with agent's reader, as `cast import`
// would; name tells the conversations apart in ids and logs.
func importVia(t *testing.T, agent, name string, conv []transcript.Message) []transcript.Message {
	home, env := agenttest.Env(t, agent, "http://127.0.0.1:1")
	cwd := filepath.Join(home, "work", "src")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := codecs.WriterOptions{Env: env}
	if agent == "opencode" {
		opts.Bin = agenttest.Bin(t, agent)
	}
	w, err := codecs.Writer(agent, opts)
	if err != nil {
		t.Fatal(err)
	}
	tg := agents.Target{Home: agenttest.NativeHome(home, agent), Cwd: cwd, SessionID: name + "-" + agent, Model: targetModel(agent)}
	written, err := w.Write(tg, conv)
	if err != nil {
		t.Fatalf("%s writer: %v", agent, err)
	}
	path := written.Path
	if agent == "opencode" {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		exp, err := opencode.Loader{Bin: opts.Bin, Env: env}.Export(ctx, tg, written.NativeID)
		if err != nil {
			t.Fatalf("opencode export: %v", err)
		}
		path = filepath.Join(t.TempDir(), "export.json")
		if err := os.WriteFile(path, exp, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := codecs.Reader(agent)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Read(path)
	if err != nil {
		t.Fatalf("%s reader: %v", agent, err)
	}
	t.Logf("%s import of the %s conversation:\n%s", agent, name, brief(msgs))
	return msgs
}

// resumeHard resumes the hard conversation in the real tgt CLI and checks
// what the model received.
func resumeHard(t *testing.T, src, tgt string, msgs []transcript.Message) {
	items := writeAndResume(t, src, tgt, msgs, hardPrompt, func(c *cli) {
		if tgt != "codex" {
			return
		}
		cfg := filepath.Join(c.nativeHome(), "config.toml")
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, append([]byte("tool_output_token_limit = 40000\n"), b...), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if err := receivedHard(items); err != nil {
		t.Fatalf("%s->%s: %v", src, tgt, err)
	}
}

// receivedHard checks the hard conversation reached the model whole and in
// order. Results are matched to their calls by id (or, where the API has
// no ids, by position among the calls).
func receivedHard(items []fakemodel.Item) error {
	text := func(role, has string) func(fakemodel.Item) bool {
		return func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && it.Role == role && strings.Contains(it.Text, has)
		}
	}
	var callA, callB fakemodel.Item
	call := func(has string, into *fakemodel.Item) func(fakemodel.Item) bool {
		return func(it fakemodel.Item) bool {
			if it.Kind == fakemodel.KindToolCall && strings.Contains(it.ToolInput, has) {
				*into = it
				return true
			}
			return false
		}
	}
	result := func(of *fakemodel.Item, check func(string) error) func(fakemodel.Item) bool {
		return func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindToolResult && (it.ToolCallID == "" || it.ToolCallID == of.ToolCallID) && check(it.Text) == nil
		}
	}
	steps := []step{
		{"the markup-like user text", func(it fakemodel.Item) bool {
			return text("user", "MARKER-H1")(it) && strings.Contains(it.Text, "MARKER-HR typed by me") && strings.Contains(it.Text, "system-reminder")
		}},
		{"the first assistant text", text("assistant", "MARKER-HA1")},
		{"the first parallel call", call("MARKER-HC1", &callA)},
		{"the second parallel call (before any result)", call("MARKER-HC2", &callB)},
		{"the 50 KB output, whole, answering the first call", result(&callA, wholeHuge)},
		{"the short output answering the second call", result(&callB, func(s string) error {
			if !strings.Contains(s, hardShort) {
				return fmt.Errorf("no %q", hardShort)
			}
			return nil
		})},
		{"the second assistant text", text("assistant", "MARKER-HA2")},
		{"the second user turn", text("user", "MARKER-H2")},
		{"the last assistant text", text("assistant", "MARKER-HA3")},
		{"the new prompt", text("user", "MARKER-HNEW")},
	}
	if n, _ := inOrder(items, steps); n < len(steps) {
		return fmt.Errorf("the model did not receive %s in order; %s\nit got:\n%s", steps[n].what, hugeReport(items), dump(items))
	}
	return nil
}

// wholeHuge says which lines of the 50 KB output s lacks. Gemini's API
// carries a result as a JSON object ({"output": "..."}); its strings are
// what the model reads.
func wholeHuge(s string) error {
	var obj map[string]any
	if json.Unmarshal([]byte(s), &obj) == nil {
		var parts []string
		for _, v := range obj {
			if str, ok := v.(string); ok {
				parts = append(parts, str)
			}
		}
		s = strings.Join(parts, "\n")
	}
	var missing []int
	n := 0
	for i := 1; n < hugeBytes; i++ {
		l := fmt.Sprintf(hugeLine, i)
		n += len(l)
		if !strings.Contains(s, l) {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d lines missing (first %d, last %d)", len(missing), missing[0], missing[len(missing)-1])
	}
	return nil
}

// hugeReport describes what became of the 50 KB output.
func hugeReport(items []fakemodel.Item) string {
	for _, it := range items {
		if it.Kind == fakemodel.KindToolResult && strings.Contains(it.Text, "HUGE-LINE 00001") {
			if err := wholeHuge(it.Text); err != nil {
				return fmt.Sprintf("the large output arrived as %d bytes: %v", len(it.Text), err)
			}
			return "the large output arrived whole"
		}
	}
	return "the large output never arrived"
}
