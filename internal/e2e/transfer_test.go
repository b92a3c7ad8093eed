package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

func code(n int32) *int32 { return &n }

// A Claude Code session goes into cast with `cast import`, comes out with
// `cast export --agent codex|claude`, and the REAL CLI resuming the
// exported transcript sends every turn to the model.
func TestImportThenExportResumesInRealCLIs(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	addr := freeAddr(t)
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr}}
	startDev(t, bins, t.TempDir(), addr)
	c.waitNode("devnode", true)

	// A native Claude transcript on disk, as Claude Code keeps it.
	src := []transcript.Message{
		{Kind: transcript.KindUser, Text: "Find the flaky test. MARK-U1"},
		{Kind: transcript.KindAssistant, Text: "Running the suite. MARK-A1", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "toolu_1", Name: "Bash", Input: `{"command":"go test ./..."}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "toolu_1", Output: "FAIL store MARK-T1", ExitCode: code(1), IsError: true}},
		{Kind: transcript.KindAssistant, Text: "store fails. MARK-A2", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindUser, Text: "/fix it please MARK-U2"},
		{Kind: transcript.KindAssistant, Text: "Fixed. MARK-A3", Model: "claude-sonnet-4-5"},
	}
	srcHome, cwd := t.TempDir(), t.TempDir()
	written, err := claude.Writer{}.Write(agents.Target{Home: srcHome, Cwd: cwd, SessionID: "origin"}, src)
	if err != nil {
		t.Fatal(err)
	}
	var imp struct {
		ID       string `json:"id"`
		Messages int    `json:"messages"`
	}
	if err := json.Unmarshal([]byte(c.must("import", "--agent", "claude", "--cwd", cwd, "--json", written.Path)), &imp); err != nil {
		t.Fatal(err)
	}
	if imp.Messages != len(src) {
		t.Fatalf("imported %d messages, want %d", imp.Messages, len(src))
	}
	read := c.must("read", imp.ID)
	for _, mark := range []string{"MARK-U1", "MARK-A1", "go test ./...", "[exit 1]", "FAIL store MARK-T1", "MARK-A2", "MARK-U2", "MARK-A3"} {
		if !strings.Contains(read, mark) {
			t.Fatalf("cast read lacks %q:\n%s", mark, read)
		}
	}
	wantTurns := []string{"MARK-U1", "MARK-A1", "MARK-T1", "MARK-A2", "MARK-U2", "MARK-A3", "MARK-NEW"}

	t.Run("codex", func(t *testing.T) {
		fake := fakemodel.Start(t)
		home, env := agenttest.Env(t, "codex", fake.URL)
		var exp struct {
			NativeID string `json:"native_id"`
			Path     string `json:"path"`
		}
		out := c.must("export", imp.ID, "--agent", "codex", "--home", agenttest.NativeHome(home, "codex"), "--json")
		if err := json.Unmarshal([]byte(out), &exp); err != nil || exp.NativeID == "" {
			t.Fatalf("export: %v %s", err, out)
		}
		agenttest.MustRun(t, context.Background(), agenttest.Bin(t, "codex"),
			[]string{"exec", "--skip-git-repo-check", "--json", "resume", exp.NativeID, "what next? MARK-NEW"}, env, cwd)
		assertTurns(t, fake, wantTurns)
	})
	t.Run("claude", func(t *testing.T) {
		fake := fakemodel.Start(t)
		home, env := agenttest.Env(t, "claude", fake.URL)
		var exp struct {
			NativeID string `json:"native_id"`
		}
		out := c.must("export", imp.ID, "--agent", "claude", "--home", agenttest.NativeHome(home, "claude"), "--json")
		if err := json.Unmarshal([]byte(out), &exp); err != nil || exp.NativeID == "" {
			t.Fatalf("export: %v %s", err, out)
		}
		agenttest.MustRun(t, context.Background(), agenttest.Bin(t, "claude"),
			[]string{"-p", "what next? MARK-NEW", "--resume", exp.NativeID}, env, cwd)
		assertTurns(t, fake, wantTurns)
	})
	t.Run("refusals", func(t *testing.T) {
		_, errOut, code := c.run("export", imp.ID, "--agent", "cursor", "--home", t.TempDir())
		if code != 1 || !strings.Contains(errOut, "Cursor cannot take over an existing session's history; start a new Cursor session instead") {
			t.Fatalf("export to cursor: exit %d %q", code, errOut)
		}
		_, errOut, code = c.run("import", "--agent", "claude", filepath.Join(t.TempDir(), "missing.jsonl"))
		if code != 2 || !strings.Contains(errOut, "missing.jsonl") { // a usage mistake, named before any request
			t.Fatalf("import of a missing file: exit %d %q", code, errOut)
		}
	})
}

// assertTurns checks that the newest conversation request holds each mark,
// in order.
func assertTurns(t *testing.T, fake *fakemodel.Server, marks []string) {
	t.Helper()
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("the CLI sent no request to the model")
	}
	items := turns[len(turns)-1].Items
	at := 0
	for _, it := range items {
		s := it.Text + " " + it.ToolName + " " + it.ToolInput
		if at < len(marks) && strings.Contains(s, marks[at]) {
			at++
		}
	}
	if at != len(marks) {
		var b strings.Builder
		for _, it := range items {
			b.WriteString(it.String() + "\n")
		}
		t.Fatalf("model request lacks %q (in order); it got:\n%s", marks[at], b.String())
	}
}
