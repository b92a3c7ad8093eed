package opencode

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

type ocEnv struct {
	fake   *fakemodel.Server
	loader Loader
	home   string // XDG_DATA_HOME: Target.Home
	cwd    string
	env    []string
}

func newOpenCode(t *testing.T) ocEnv {
	bin := agenttest.Bin(t, "opencode")
	fake := fakemodel.Start(t)
	home, env := agenttest.Env(t, "opencode", fake.URL)
	cwd := agenttest.Cwd(t, t.TempDir(), "work")
	return ocEnv{fake: fake, loader: Loader{Bin: bin, Env: env}, home: agenttest.NativeHome(home, "opencode"), cwd: cwd, env: env}
}

func (o ocEnv) run(t *testing.T, args ...string) agenttest.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return agenttest.MustRun(t, ctx, o.loader.Bin, args, o.env, o.cwd)
}

// conversation is a transcript from Claude Code and Codex: shell calls under
// both names, an orphan call, an error result, an internal row and a notice.
func conversation() []transcript.Message {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: "OC-U1: make notes.txt <with> \"quotes\" & stuff", Agent: "claude"},
		{Kind: transcript.KindThinking, Text: "OC-THINK: use Bash", Agent: "claude"},
		{Kind: transcript.KindAssistant, Text: "OC-A1: creating it", Agent: "claude"},
		{Kind: transcript.KindToolCall, Agent: "claude", ToolCall: &transcript.ToolCall{ID: "toolu_OC1", Name: "Bash", Input: `{"command":"touch notes.txt && echo OC-CREATED","description":"create"}`}},
		{Kind: transcript.KindToolResult, Agent: "claude", ToolResult: &transcript.ToolResult{CallID: "toolu_OC1", Output: "OC-CREATED\n", ExitCode: i32(0)}},
		{Kind: transcript.KindToolCall, Agent: "claude", ToolCall: &transcript.ToolCall{ID: "toolu_OC2", Name: "Read", Input: `{"file_path":"notes.txt"}`}},
		{Kind: transcript.KindInternal, Text: "OC-INTERNAL bookkeeping"},
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "OC-NOTICE: claude -> codex"},
		{Kind: transcript.KindUser, Text: "OC-U2: now list the directory", Agent: "codex"},
		{Kind: transcript.KindToolCall, Agent: "codex", ToolCall: &transcript.ToolCall{ID: "call_OC3", Name: "exec_command", Input: `{"cmd":"ls"}`}},
		{Kind: transcript.KindToolResult, Agent: "codex", ToolResult: &transcript.ToolResult{CallID: "call_OC3", Output: "OC-LS notes.txt\n", ExitCode: i32(0)}},
		{Kind: transcript.KindToolCall, Agent: "codex", ToolCall: &transcript.ToolCall{ID: "call_OC4", Name: "exec_command", Input: `{"cmd":"cat missing"}`}},
		{Kind: transcript.KindToolResult, Agent: "codex", ToolResult: &transcript.ToolResult{CallID: "call_OC4", Output: "OC-ERR no such file", IsError: true, ExitCode: i32(1)}},
		{Kind: transcript.KindAssistant, Text: "OC-A2: the directory has notes.txt", Agent: "codex"},
	}
	return agenttest.Stamp(msgs, at)
}

// wantItems is what the model must receive for conversation(), in order.
var wantItems = []string{
	`user text "OC-U1: make notes.txt <with> \"quotes\" & stuff"`,
	`assistant text "OC-A1: creating it"`,
	`assistant tool_call bash({"command":"touch notes.txt && echo OC-CREATED","description":"create"}) id=toolu_OC1`,
	`tool tool_result id=toolu_OC1 "OC-CREATED\n"`,
	`assistant tool_call Read({"file_path":"notes.txt"}) id=toolu_OC2`,
	`tool tool_result id=toolu_OC2 "` + OrphanCallOutput + `"`,
	`user text "<cast_notice type=\"agent_switch\">\nOC-NOTICE: claude -> codex\n</cast_notice>"`,
	`user text "OC-U2: now list the directory"`,
	`assistant tool_call bash({"command":"ls"}) id=call_OC3`,
	`tool tool_result id=call_OC3 "OC-LS notes.txt\n"`,
	`assistant tool_call bash({"command":"cat missing"}) id=call_OC4`,
	`tool tool_result id=call_OC4 "OC-ERR no such file"`,
	`assistant text "OC-A2: the directory has notes.txt"`,
}

func assertInOrder(t *testing.T, got []fakemodel.Item, want []string) {
	t.Helper()
	agenttest.AssertItemsInOrder(t, got, want, "OC-INTERNAL", "OC-THINK")
}

// A transcript from other agents, loaded with the real `opencode import`,
// continues with the real `opencode run -s` and the model receives every
// turn in order.
func TestE2ERunResumesImported(t *testing.T) {
	o := newOpenCode(t)
	// A registry on loopback, online: what OpenCode would fetch from npm
	// at start reaches it (declarePlugin means it fetches nothing).
	var fetched atomic.Int32
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(registry.Close)
	o.env = append(slices.DeleteFunc(slices.Clone(o.env), func(kv string) bool { return strings.HasPrefix(kv, "npm_config_offline=") }),
		"npm_config_registry="+registry.URL+"/")
	o.loader.Env = o.env
	tg := agents.Target{Home: o.home, Cwd: o.cwd, SessionID: "ses-e2e-oc", Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}
	w, err := Writer{Loader: o.loader}.Write(tg, conversation())
	if err != nil {
		t.Fatal(err)
	}
	if w.Path != DBPath(o.home) {
		t.Errorf("path %s", w.Path)
	}
	if _, err := os.Stat(w.Path); err != nil {
		t.Errorf("no store under Target.Home: %v", err)
	}
	res := o.run(t, "run", "-s", w.NativeID, "OC-NEW: what did we do?")
	turns := o.fake.Turns()
	if len(turns) == 0 {
		t.Fatalf("no model request; stderr:\n%s", res.Stderr)
	}
	// `opencode run` wraps a message argument that contains spaces in
	// double quotes before sending it.
	assertInOrder(t, turns[0].Items, append(append([]string{}, wantItems...), `user text "\"OC-NEW: what did we do?\""`))
	// OpenCode installs @opencode-ai/plugin into its config folder at every
	// start unless it is there (declarePlugin): a run waits on that install,
	// and in a test's fresh HOME it fetched from the npm registry each time.
	if n := fetched.Load(); n > 0 {
		t.Errorf("opencode asked the npm registry %d times: it installed its plugin package", n)
	}
}

// export -> read -> write -> import -> export: a session the real OpenCode
// produced (two turns, a shell call) survives the round trip through the
// neutral form, and the rewritten copy resumes with every turn.
func TestE2ERoundTrip(t *testing.T) {
	o := newOpenCode(t)
	first := o.run(t, "run", "--format", "json", fakemodel.ToolTrigger+" CMD[echo oc-tool-ran] please run it")
	id := regexp.MustCompile(`ses_[A-Za-z0-9]+`).FindString(first.Stdout)
	if id == "" {
		t.Fatalf("no session id in run output:\n%s", first.Stdout)
	}
	o.run(t, "run", "-s", id, "OC-RT-2: second turn")
	tg := agents.Target{Home: o.home, Cwd: o.cwd, SessionID: "ses-e2e-rt"}
	ctx := context.Background()
	exported, err := o.loader.Export(ctx, tg, id)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := Parse(bytes.NewReader(exported))
	if err != nil {
		t.Fatal(err)
	}
	// Everything the pinned CLI exports is known: an import reports nothing
	// skipped (a new version's parts would show up here).
	if len(orig.Kinds) > 0 {
		t.Errorf("the reader does not know parts of the pinned CLI's export: %v", orig.Kinds)
	}
	// The node reads the store itself (StoreExport): the same session.
	fromDB, err := StoreExport(ctx, o.home, id)
	if err != nil {
		t.Fatal(err)
	}
	if db, err := Parse(bytes.NewReader(fromDB)); err != nil || !reflect.DeepEqual(db, orig) {
		t.Errorf("read from the database (%v):\n%+v\nopencode export:\n%+v", err, db.Messages, orig.Messages)
	}
	want := brief(withoutThinking(orig.Messages))
	if !strings.Contains(strings.Join(want, "\n"), "oc-tool-ran") || len(want) < 6 {
		t.Fatalf("the real session lacks the tool call or turns:\n%s", strings.Join(want, "\n"))
	}

	// No Target.Model: the writer asks OpenCode for its configured default.
	w, err := Writer{Loader: o.loader}.Write(tg, orig.Messages)
	if err != nil {
		t.Fatal(err)
	}
	if w.NativeID == id {
		t.Fatal("the copy reused the original session id")
	}
	again, err := o.loader.Export(ctx, tg, w.NativeID)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(bytes.NewReader(again))
	if err != nil {
		t.Fatal(err)
	}
	if got := brief(back.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("round trip changed the session:\n got: %q\nwant: %q", got, want)
	}

	o.fake.Reset()
	o.run(t, "run", "-s", w.NativeID, "OC-RT-3: and now?")
	turns := o.fake.Turns()
	if len(turns) == 0 {
		t.Fatal("no model request on resume")
	}
	items := agenttest.ItemStrings(orig.Messages, false)
	assertInOrder(t, turns[0].Items, append(items, `user text "\"OC-RT-3: and now?\""`))

	// Writing again for the same native id replaces the session instead of
	// being ignored by import.
	tg.NativeID = w.NativeID
	short := orig.Messages[:1]
	if _, err := (Writer{Loader: o.loader}).Write(tg, short); err != nil {
		t.Fatal(err)
	}
	third, err := o.loader.Export(ctx, tg, w.NativeID)
	if err != nil {
		t.Fatal(err)
	}
	p3, _ := Parse(bytes.NewReader(third))
	if got := brief(p3.Messages); len(got) != 1 {
		t.Errorf("rewrite kept old messages: %q", got)
	}
}

func withoutThinking(msgs []transcript.Message) []transcript.Message {
	var out []transcript.Message
	for _, m := range msgs {
		if m.Kind != transcript.KindThinking {
			out = append(out, m)
		}
	}
	return out
}

// `opencode export` of a session far past 64 KiB comes back whole: the
// CLI exits before a pipe drains, and the export of a long session was
// cut at a multiple of 64 KiB until its output went to a file.
func TestE2EExportOfALongSessionIsWhole(t *testing.T) {
	o := newOpenCode(t)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{{Kind: transcript.KindUser, Text: "OC-LONG start", Time: at}}
	const calls = 300
	for i := range calls {
		id := fmt.Sprintf("toolu_L%03d", i)
		msgs = append(msgs,
			transcript.Message{Kind: transcript.KindToolCall, Time: at, ToolCall: &transcript.ToolCall{ID: id, Name: "Bash", Input: `{"command":"true"}`}},
			transcript.Message{Kind: transcript.KindToolResult, Time: at, ToolResult: &transcript.ToolResult{CallID: id, Output: strings.Repeat("x", 2000)}})
	}
	tg := agents.Target{Home: o.home, Cwd: o.cwd, SessionID: "ses-e2e-long", Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}
	w, err := Writer{Loader: o.loader}.Write(tg, msgs)
	if err != nil {
		t.Fatal(err)
	}
	exported, err := o.loader.Export(context.Background(), tg, w.NativeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(exported) < 4*64<<10 {
		t.Fatalf("the export is %d bytes; the test needs one past 256 KiB", len(exported))
	}
	got, err := Parse(bytes.NewReader(exported))
	if err != nil {
		t.Fatalf("export of %d bytes does not parse: %v", len(exported), err)
	}
	results := 0
	for _, m := range got.Messages {
		if m.Kind == transcript.KindToolResult {
			results++
		}
	}
	if results != calls {
		t.Fatalf("the export holds %d tool results, want %d", results, calls)
	}
}

// A probe's run stopped before OpenCode printed the session's id (its
// model never answered) still made a session in the store: RemoveScratch
// with no id finds it by the scratch folder it ran in and deletes it with
// the real `opencode session delete`, and the user's session of another
// folder stays.
func TestE2ERemoveScratchWithoutTheID(t *testing.T) {
	o := newOpenCode(t)
	scratch := agenttest.Cwd(t, t.TempDir(), "probe", "opencode-1")
	model := agenttest.FakeProvider + "/" + agenttest.FakeModel
	msgs := conversation()[:3]
	for _, tg := range []agents.Target{
		{Home: o.home, Cwd: scratch, SessionID: "ses-probe", Model: model},
		{Home: o.home, Cwd: o.cwd, SessionID: "ses-user", Model: model},
	} {
		if _, err := (Writer{Loader: o.loader}).Write(tg, msgs); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := agents.Lookup("opencode")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := a.RemoveScratch(ctx, o.loader.Bin, o.env, agents.Target{Home: o.home, Cwd: scratch}, "", ""); err != nil {
		t.Fatal(err)
	}
	list, err := StoreSessions(ctx, o.home)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range list {
		left = append(left, s.ID+" "+s.Cwd)
	}
	if len(list) != 1 || list[0].Cwd != o.cwd {
		t.Fatalf("the store keeps %q; want only the user's session of %s", left, o.cwd)
	}
}
