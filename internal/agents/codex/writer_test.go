package codex

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 30, 3, 4, 5, 0, time.UTC) }

func target(t *testing.T) agents.Target {
	return agents.Target{Home: t.TempDir(), Cwd: "/work/project", SessionID: "ses-test-1"}
}

func i32(n int32) *int32 { return &n }

func user(s string) transcript.Message { return transcript.Message{Kind: transcript.KindUser, Text: s} }
func asst(s string) transcript.Message {
	return transcript.Message{Kind: transcript.KindAssistant, Text: s}
}
func call(id, name, in string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: name, Input: in}}
}
func result(id, out string, exit *int32) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: out, ExitCode: exit}}
}

// readLines returns the rollout's lines as envelopes.
func readLines(t *testing.T, path string) []envelope {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []envelope
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e envelope
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if e.Timestamp == "" {
			t.Fatalf("line without timestamp: %s", sc.Text())
		}
		out = append(out, e)
	}
	return out
}

// modelItems renders the response_item payloads of a rollout compactly.
func modelItems(t *testing.T, path string) []string {
	var out []string
	for _, e := range readLines(t, path) {
		if e.Type != lineResponseItem {
			continue
		}
		var it item
		_ = json.Unmarshal(e.Payload, &it)
		switch it.Type {
		case "message":
			out = append(out, it.Role+": "+textOf(it.Content))
		case "function_call":
			out = append(out, "call "+it.CallID+" "+it.Name+" "+string(it.Arguments))
		case "custom_tool_call":
			out = append(out, "custom "+it.CallID+" "+it.Name+" "+it.Input)
		default:
			o, _ := outputText(it.Output)
			out = append(out, it.Type+" "+it.CallID+" "+o)
		}
	}
	return out
}

func TestWriteRendersAndRepairs(t *testing.T) {
	tests := []struct {
		name string
		msgs []transcript.Message
		want []string
	}{
		{
			name: "turns with a paired call",
			msgs: []transcript.Message{user("u1"), asst("a1"), call("c1", "exec_command", `{"cmd":"ls"}`), result("c1", "x", nil), asst("a2")},
			want: []string{"user: u1", "assistant: a1", `call c1 exec_command {"cmd":"ls"}`, "function_call_output c1 x", "assistant: a2"},
		},
		{
			name: "claude bash becomes exec_command with the exit code stated",
			msgs: []transcript.Message{user("u"), call("toolu_1", "Bash", `{"command":"echo hi","description":"say hi"}`), result("toolu_1", "hi\n", i32(0))},
			want: []string{"user: u", `call toolu_1 exec_command {"cmd":"echo hi"}`, "function_call_output toolu_1 Process exited with code 0\nOutput:\nhi\n"},
		},
		{
			name: "foreign non-shell tool keeps its name, made API-safe",
			msgs: []transcript.Message{call("c1", "Read", `{"file_path":"/a"}`), result("c1", "data", nil), call("c2", "mcp:server.tool", `[1]`), result("c2", "ok", nil)},
			want: []string{`call c1 Read {"file_path":"/a"}`, "function_call_output c1 data", `call c2 mcp_server_tool {"input":[1]}`, "function_call_output c2 ok"},
		},
		{
			name: "orphan call gets an explicit output before the next turn",
			msgs: []transcript.Message{user("u"), call("c1", "exec_command", `{}`), user("u2")},
			want: []string{"user: u", "call c1 exec_command {}", "function_call_output c1 " + OrphanCallOutput, "user: u2"},
		},
		{
			name: "orphan result gets an explicit call",
			msgs: []transcript.Message{user("u"), result("c9", "out", nil)},
			want: []string{"user: u", "call c9 " + OrphanResultName + " " + OrphanResultArgs, "function_call_output c9 out"},
		},
		{
			name: "late result moves up, result before call puts the call first",
			msgs: []transcript.Message{call("c1", "x", `{}`), asst("between"), result("c1", "late", nil), result("c2", "early", nil), call("c2", "y", `{}`)},
			want: []string{"call c1 x {}", "function_call_output c1 late", "assistant: between", "call c2 y {}", "function_call_output c2 early"},
		},
		{
			name: "call ids repeated across turns stay paired (renamed from the second on)",
			msgs: []transcript.Message{user("u"), call("call_0", "x", `{}`), result("call_0", "r1", nil),
				user("u2"), call("call_0", "y", `{}`), result("call_0", "r2", nil),
				user("u3"), call("call_0", "z", `{}`), user("u4"), call("call_0", "w", `{}`), result("call_0", "r4", nil)},
			want: []string{"user: u", "call call_0 x {}", "function_call_output call_0 r1",
				"user: u2", "call call_0_cast2 y {}", "function_call_output call_0_cast2 r2",
				"user: u3", "call call_0_cast3 z {}", "function_call_output call_0_cast3 " + OrphanCallOutput,
				"user: u4", "call call_0_cast4 w {}", "function_call_output call_0_cast4 r4"},
		},
		{
			name: "custom tool call round trips as custom",
			msgs: []transcript.Message{call("c1", "apply_patch", `"*** Begin Patch\n*** End Patch"`), result("c1", "Done!", nil)},
			want: []string{"custom c1 apply_patch *** Begin Patch\n*** End Patch", "custom_tool_call_output c1 Done!"},
		},
		{
			name: "internal rows never written, notices as developer context, thinking UI-only",
			msgs: []transcript.Message{
				{Kind: transcript.KindInternal, Text: "secret server row"},
				{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "claude -> codex"},
				{Kind: transcript.KindThinking, Text: "hmm"},
				user("u"),
			},
			want: []string{"developer: <cast_notice type=\"agent_switch\">\nclaude -> codex\n</cast_notice>", "user: u"},
		},
		{
			name: "error result without exit code says so",
			msgs: []transcript.Message{call("c1", "Read", `{}`), {Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c1", Output: "ENOENT", IsError: true}}},
			want: []string{"call c1 Read {}", "function_call_output c1 Tool error:\nENOENT"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := target(t)
			w, err := Writer{Now: fixedNow}.Write(tg, tc.msgs)
			if err != nil {
				t.Fatal(err)
			}
			got := modelItems(t, w.Path)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
			raw, _ := os.ReadFile(w.Path)
			if strings.Contains(string(raw), "secret server row") {
				t.Error("internal row leaked into the rollout")
			}
		})
	}
}

func TestWriteFileNameAndMeta(t *testing.T) {
	tg := target(t)
	w, err := Writer{Now: fixedNow}.Write(tg, []transcript.Message{user("hello")})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`/sessions/\d{4}/\d{2}/\d{2}/rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-([0-9a-f-]{36})\.jsonl$`)
	m := re.FindStringSubmatch(w.Path)
	if m == nil || m[1] != w.NativeID {
		t.Fatalf("path %s does not name thread %s", w.Path, w.NativeID)
	}
	lines := readLines(t, w.Path)
	var meta sessionMeta
	if lines[0].Type != lineSessionMeta || json.Unmarshal(lines[0].Payload, &meta) != nil {
		t.Fatalf("first line is not session_meta: %+v", lines[0])
	}
	if meta.ID != w.NativeID || meta.Cwd != tg.Cwd || meta.Originator == "" || meta.CLIVersion == "" || meta.Timestamp == "" {
		t.Errorf("session_meta incomplete: %+v", meta)
	}
	for _, l := range lines {
		if l.Type == lineTurnContext {
			t.Errorf("turn_context written without a model: %s", l.Payload)
		}
	}
	var ev eventMsg
	if lines[2].Type != lineEventMsg || json.Unmarshal(lines[2].Payload, &ev) != nil || ev.Type != "user_message" || ev.Message != "hello" {
		t.Errorf("no user_message event after the user item: %+v", lines[2])
	}

	// Same session again (another day): same id, same file, no second copy.
	later := func() time.Time { return fixedNow().Add(48 * time.Hour) }
	w2, err := Writer{Now: later}.Write(tg, []transcript.Message{user("hello"), asst("again")})
	if err != nil {
		t.Fatal(err)
	}
	if w2.NativeID != w.NativeID || w2.Path != w.Path {
		t.Errorf("rewrite moved the thread: %+v vs %+v", w2, w)
	}
	n := 0
	_ = filepath.WalkDir(tg.Home, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if n != 1 {
		t.Errorf("%d files under home, want 1", n)
	}

	// With a model, each user turn is preceded by a turn_context naming it,
	// with the most restrictive policies.
	tg.Model = "gpt-test"
	w3, err := Writer{Now: fixedNow}.Write(tg, []transcript.Message{user("one"), asst("a"), user("two")})
	if err != nil {
		t.Fatal(err)
	}
	var tcs []string
	for _, l := range readLines(t, w3.Path) {
		if l.Type == lineTurnContext {
			tcs = append(tcs, string(l.Payload))
		}
	}
	wantTC := `{"cwd":"/work/project","approval_policy":"untrusted","sandbox_policy":{"type":"read-only"},"model":"gpt-test","summary":"auto"}`
	if len(tcs) != 2 || tcs[0] != wantTC {
		t.Errorf("turn_context lines %q, want 2 of %s", tcs, wantTC)
	}

	if _, err := (Writer{}).Write(agents.Target{Home: tg.Home, Cwd: "/x", NativeID: "not-a-uuid"}, nil); err == nil {
		t.Error("non-UUID native id accepted")
	}
	if _, err := (Writer{}).Write(agents.Target{Home: tg.Home, Cwd: "relative"}, nil); err == nil {
		t.Error("relative cwd accepted")
	}
}

// Every corpus rollout survives read -> write -> read: every message comes
// back in order; the only additions are explicit outputs for calls that had
// none.
func TestRoundTripCorpus(t *testing.T) {
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		t.Run(path, func(t *testing.T) {
			orig, err := Reader{}.Read(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Writer{Now: fixedNow}.Write(target(t), orig)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Reader{}.Read(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			want, got := brief(orig), brief(back)
			j := 0
			for _, g := range got {
				if j < len(want) && g == want[j] {
					j++
					continue
				}
				if !strings.HasSuffix(g, OrphanCallOutput) {
					t.Errorf("unexpected message %q", g)
				}
			}
			if j != len(want) {
				t.Errorf("lost messages from %q on\n got: %q\nwant: %q", want[j], got, want)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A message or tool output that is only an image (a pasted picture, a
// Claude Read of a screenshot) has no text part: Codex cannot read an
// input_text without its text, and on resume drops the line
// (TestToolImageCarriedAcrossSwitch runs it).
func TestWriteImageOnlyHasNoEmptyText(t *testing.T) {
	png := transcript.Image{MediaType: "image/png", Data: []byte("\x89PNG fake")}
	pasted := transcript.Message{Kind: transcript.KindUser, Images: []transcript.Image{png}}
	shot := result("c1", "", nil)
	shot.Images = []transcript.Image{png}
	w, err := Writer{Now: fixedNow}.Write(target(t), []transcript.Message{pasted, asst("a picture"), call("c1", "Read", `{"file_path":"/w/shot.png"}`), shot, asst("a screenshot")})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"type":"input_image"`); n != 2 || strings.Contains(string(raw), `{"type":"input_text"}`) {
		t.Fatalf("%d images (want 2), or an input_text without text:\n%s", n, raw)
	}
}
