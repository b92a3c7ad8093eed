package codex

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// conversation is a multi-turn transcript written partly by Claude Code (its
// Bash tool, an orphan call) and partly by Codex, with rows Codex must
// not see (internal) or sees only as context (a notice).
func conversation() []transcript.Message {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: "E2E-U1: make notes.txt <with> \"quotes\" & stuff", Agent: "claude"},
		{Kind: transcript.KindThinking, Text: "E2E-THINK: I should use Bash", Agent: "claude"},
		{Kind: transcript.KindAssistant, Text: "E2E-A1: creating it", Agent: "claude"},
		{Kind: transcript.KindToolCall, Agent: "claude", ToolCall: &transcript.ToolCall{ID: "toolu_E2E1", Name: "Bash", Input: `{"command":"touch notes.txt && echo E2E-CREATED","description":"create"}`}},
		{Kind: transcript.KindToolResult, Agent: "claude", ToolResult: &transcript.ToolResult{CallID: "toolu_E2E1", Output: "E2E-CREATED\n", ExitCode: i32(0)}},
		{Kind: transcript.KindToolCall, Agent: "claude", ToolCall: &transcript.ToolCall{ID: "toolu_E2E2", Name: "Read", Input: `{"file_path":"notes.txt"}`}},
		{Kind: transcript.KindInternal, Text: "E2E-INTERNAL server bookkeeping"},
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "E2E-NOTICE: claude -> codex"},
		{Kind: transcript.KindUser, Text: "E2E-U2: now list the directory", Agent: "codex"},
		{Kind: transcript.KindToolCall, Agent: "codex", ToolCall: &transcript.ToolCall{ID: "call_E2E3", Name: "exec_command", Input: `{"cmd":"ls"}`}},
		{Kind: transcript.KindToolResult, Agent: "codex", ToolResult: &transcript.ToolResult{CallID: "call_E2E3", Output: "Process exited with code 0\nOutput:\nE2E-LS notes.txt\n", ExitCode: i32(0)}},
		{Kind: transcript.KindAssistant, Text: "E2E-A2: the directory has notes.txt", Agent: "codex"},
	}
	return agenttest.Stamp(msgs, at)
}

// wantItems is what the model must receive for conversation(), in order.
var wantItems = []string{
	`user text "E2E-U1: make notes.txt <with> \"quotes\" & stuff"`,
	`assistant text "E2E-A1: creating it"`,
	`assistant tool_call exec_command({"cmd":"touch notes.txt && echo E2E-CREATED"}) id=toolu_E2E1`,
	`tool tool_result id=toolu_E2E1 "Process exited with code 0\nOutput:\nE2E-CREATED\n"`,
	`assistant tool_call Read({"file_path":"notes.txt"}) id=toolu_E2E2`,
	`tool tool_result id=toolu_E2E2 "` + OrphanCallOutput + `"`,
	`system text "<cast_notice type=\"agent_switch\">\nE2E-NOTICE: claude -> codex\n</cast_notice>"`,
	`user text "E2E-U2: now list the directory"`,
	`assistant tool_call exec_command({"cmd":"ls"}) id=call_E2E3`,
	`tool tool_result id=call_E2E3 "Process exited with code 0\nOutput:\nE2E-LS notes.txt\n"`,
	`assistant text "E2E-A2: the directory has notes.txt"`,
}

// assertInOrder checks that want appears in got in order (Codex adds its own
// system prompt and environment context around the history).
func assertInOrder(t *testing.T, got []fakemodel.Item, want []string) {
	t.Helper()
	agenttest.AssertItemsInOrder(t, got, want, "E2E-INTERNAL", "E2E-THINK")
}

func newCodex(t *testing.T) (fake *fakemodel.Server, bin, codexHome string, env []string, cwd string) {
	bin = agenttest.Bin(t, "codex")
	fake = fakemodel.Start(t)
	home, env := agenttest.Env(t, "codex", fake.URL)
	cwd = agenttest.Cwd(t, t.TempDir(), "work")
	return fake, bin, agenttest.NativeHome(home, "codex"), env, cwd
}

// The real `codex exec resume` continues a rollout cast wrote, and the model
// receives every turn of it in order.
func TestE2EExecResume(t *testing.T) {
	fake, bin, codexHome, env, cwd := newCodex(t)
	w, err := Writer{}.Write(agents.Target{Home: codexHome, Cwd: cwd, SessionID: "ses-e2e-exec", Model: agenttest.FakeModel}, conversation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "--json", "resume", w.NativeID, "E2E-NEW: what did we do?"}, env, cwd)
	if !strings.Contains(res.Stdout, w.NativeID) {
		t.Errorf("codex did not resume thread %s:\n%s", w.NativeID, res.Stdout)
	}
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatalf("no model request; stderr:\n%s", res.Stderr)
	}
	assertInOrder(t, turns[0].Items, append(append([]string{}, wantItems...), `user text "E2E-NEW: what did we do?"`))

	// Codex appended its turn to the same file, which still reads back whole.
	back, err := Reader{}.Read(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	got := brief(back)
	if last := got[len(got)-1]; !strings.HasPrefix(last, "assistant FAKE-ANSWER") {
		t.Errorf("codex's answer not appended to %s: last message %q", w.Path, last)
	}
	for _, m := range back {
		if m.Kind == transcript.KindAssistant && m.Model != agenttest.FakeModel {
			t.Errorf("assistant message read back without the model from turn_context: %+v", m)
		}
	}
	if n := strings.Count(strings.Join(got, "\n"), "E2E-U1"); n != 1 {
		t.Errorf("first user turn read %d times:\n%s", n, strings.Join(got, "\n"))
	}
}

// A rollout the real Codex wrote (two turns, a shell call) is read into the
// neutral form, written for a fresh CODEX_HOME, and resumed there: the model
// receives every user turn, answer and call/output pair in order.
func TestE2ERealRolloutRoundTrip(t *testing.T) {
	fake, bin, codexHome, env, cwd := newCodex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first := agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "--json", fakemodel.ToolTrigger + " CMD[echo codex-tool-ran] please"}, env, cwd)
	id := regexp.MustCompile(`"thread_id":"([0-9a-f-]{36})"`).FindStringSubmatch(first.Stdout)
	if id == nil {
		t.Fatalf("no thread id:\n%s", first.Stdout)
	}
	agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "resume", id[1], "RT-2: second turn"}, env, cwd)
	src, err := existingRollout(codexHome, id[1])
	if err != nil || src == "" {
		t.Fatalf("no rollout for %s: %v", id[1], err)
	}
	msgs, skipped, err := Reader{}.ReadReport(src)
	if err != nil {
		t.Fatal(err)
	}
	// Everything the pinned CLI writes is known: an import reports nothing
	// skipped (a new version's records would show up here).
	if len(skipped) > 0 {
		t.Errorf("the reader does not know parts of the pinned CLI's rollout: %v", skipped)
	}
	want := agenttest.ItemStrings(msgs, true)
	sawExit := false
	for _, m := range msgs {
		if m.Kind == transcript.KindToolResult {
			sawExit = sawExit || (m.ToolResult.ExitCode != nil && *m.ToolResult.ExitCode == 0 && strings.Contains(m.ToolResult.Output, "codex-tool-ran"))
		}
	}
	if len(want) < 6 || !sawExit {
		t.Fatalf("real rollout read as %d items (exit code parsed: %v):\n%s", len(want), sawExit, strings.Join(brief(msgs), "\n"))
	}

	home2, env2, cwd2 := newCodexHome(t, fake)
	w, err := Writer{}.Write(agents.Target{Home: home2, Cwd: cwd2, SessionID: "ses-rt"}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	fake.Reset()
	agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "resume", w.NativeID, "RT-3: and now?"}, env2, cwd2)
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("no model request on resume")
	}
	assertInOrder(t, turns[0].Items, append(want, `user text "RT-3: and now?"`))
}

// newCodexHome is a second isolated Codex home talking to the same fake.
func newCodexHome(t *testing.T, fake *fakemodel.Server) (codexHome string, env []string, cwd string) {
	home, env := agenttest.Env(t, "codex", fake.URL)
	cwd = agenttest.Cwd(t, t.TempDir(), "work2")
	return agenttest.NativeHome(home, "codex"), env, cwd
}

// A picture pasted alone and a screenshot a tool returned alone (no text
// with either) reach the model when the real Codex resumes the rollout,
// each in its place.
func TestE2EImageOnlyMessages(t *testing.T) {
	fake, bin, codexHome, env, cwd := newCodex(t)
	pasted, shot := e2ePNG(t, 10), e2ePNG(t, 200)
	u := transcript.Message{Kind: transcript.KindUser, Images: []transcript.Image{pasted}}
	r := transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "call_img1"}, Images: []transcript.Image{shot}}
	msgs := []transcript.Message{
		u,
		{Kind: transcript.KindAssistant, Text: "E2E-IA1 a picture; let me look at the file"},
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "call_img1", Name: "Read", Input: `{"file_path":"/w/shot.png"}`}},
		r,
		{Kind: transcript.KindAssistant, Text: "E2E-IA2 the file shows a square"},
	}
	w, err := Writer{}.Write(agents.Target{Home: codexHome, Cwd: cwd, SessionID: "ses-e2e-img", Model: agenttest.FakeModel}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "--json", "resume", w.NativeID, "E2E-INEW what did they show?"}, env, cwd)
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("no model request")
	}
	var got []string
	for _, it := range turns[0].Items {
		switch {
		case it.Kind == fakemodel.KindImage && it.Text == fakemodel.ImageText(pasted.MediaType, pasted.Data):
			got = append(got, "pasted")
		case it.Kind == fakemodel.KindImage && it.Text == fakemodel.ImageText(shot.MediaType, shot.Data):
			got = append(got, "shot")
		default:
			for _, mark := range []string{"E2E-IA1", "E2E-IA2", "E2E-INEW"} {
				if strings.Contains(it.Text, mark) {
					got = append(got, mark)
				}
			}
		}
	}
	if want := "pasted E2E-IA1 shot E2E-IA2 E2E-INEW"; strings.Join(got, " ") != want {
		t.Fatalf("the model got %q, want %q", strings.Join(got, " "), want)
	}
}

// e2ePNG is a 2x2 PNG of one grey level: another level, another image.
func e2ePNG(t *testing.T, level uint8) transcript.Image {
	img := image.NewGray(image.Rect(0, 0, 2, 2))
	for i := range img.Pix {
		img.Pix[i] = level
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return transcript.Image{MediaType: "image/png", Data: b.Bytes()}
}
