package claude

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

func TestSlug(t *testing.T) {
	long := "/home/user/" + strings.Repeat("very-long-directory-name/", 9) + "end"
	tests := []struct{ in, want string }{
		{"/srv/app/work", "-srv-app-work"},
		{"/tmp/a b/ü😀x", "-tmp-a-b----x"}, // the emoji is two UTF-16 units
		// Expected value computed with the CLI's own JavaScript function.
		{long, "-home-user-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-dire-s7b430"},
	}
	for _, tc := range tests {
		if got := Slug(tc.in); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkFile asserts the rules the real CLI needs (see the package doc) and
// returns the decoded lines.
func checkFile(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v", len(lines)+1, err)
		}
		lines = append(lines, m)
	}
	var prevUUID any
	var prevTS string
	msgIDs := map[string]bool{}
	var openCalls map[string]bool
	for i, l := range lines {
		where := fmt.Sprintf("line %d", i+1)
		if l["parentUuid"] != prevUUID {
			t.Errorf("%s: parentUuid %v, want %v (chain broken)", where, l["parentUuid"], prevUUID)
		}
		ts, _ := l["timestamp"].(string)
		if ts == "" || ts <= prevTS {
			t.Errorf("%s: timestamp %q not after %q", where, ts, prevTS)
		}
		prevUUID, prevTS = l["uuid"], ts
		msg, _ := l["message"].(map[string]any)
		content := msg["content"]
		switch l["type"] {
		case "assistant":
			id, _ := msg["id"].(string)
			if id == "" || msgIDs[id] {
				t.Errorf("%s: assistant message id %q missing or reused", where, id)
			}
			msgIDs[id] = true
			if m, _ := msg["model"].(string); m == "" || m == "<synthetic>" {
				t.Errorf("%s: model %q", where, msg["model"])
			}
			blocks, ok := content.([]any)
			if !ok || len(blocks) == 0 {
				t.Fatalf("%s: assistant content must be a non-empty array", where)
			}
			if openCalls != nil {
				t.Errorf("%s: tool calls of the previous line left unanswered", where)
			}
			for _, b := range blocks {
				bm := b.(map[string]any)
				if bm["type"] == "tool_use" {
					if openCalls == nil {
						openCalls = map[string]bool{}
					}
					openCalls[bm["id"].(string)] = true
					if !nameRE.MatchString(bm["name"].(string)) {
						t.Errorf("%s: tool name %q not accepted by the API", where, bm["name"])
					}
					if _, ok := bm["input"].(map[string]any); !ok {
						t.Errorf("%s: tool input is not an object", where)
					}
				}
			}
		case "user":
			blocks, _ := content.([]any)
			for _, b := range blocks {
				bm := b.(map[string]any)
				if bm["type"] == "tool_result" {
					id := bm["tool_use_id"].(string)
					if !openCalls[id] {
						t.Errorf("%s: tool_result %s has no tool_use on the line before", where, id)
					}
					delete(openCalls, id)
				}
			}
			if len(openCalls) > 0 {
				t.Errorf("%s: tool calls %v left without results", where, openCalls)
			}
			openCalls = nil
		default:
			t.Errorf("%s: unexpected type %v", where, l["type"])
		}
	}
	return lines
}

func target(t *testing.T) agents.Target {
	return agents.Target{Home: filepath.Join(t.TempDir(), ".claude"), Cwd: t.TempDir(), SessionID: "ses-1"}
}

// conversationKinds drops what a Claude round trip legitimately changes:
// thinking (not written) and results cast had to synthesize.
func conversationKinds(msgs []transcript.Message) string {
	var keep []transcript.Message
	for _, m := range msgs {
		if m.Kind == transcript.KindThinking || m.ToolResult != nil && m.ToolResult.Output == missingResult {
			continue
		}
		keep = append(keep, m)
	}
	return kinds(keep)
}

func TestRoundTripCorpus(t *testing.T) {
	for _, p := range corpusFiles(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			src, err := Reader{}.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Writer{}.Write(target(t), src)
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, w.Path)
			back, err := Reader{}.Read(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := conversationKinds(back), conversationKinds(src); got != want {
				t.Errorf("round trip changed the conversation\ngot:\n%s\nwant:\n%s", got, want)
			}
			for i := range back {
				if back[i].Kind == transcript.KindUser && !strings.Contains(kinds(src), kinds(back[i:i+1])) {
					t.Errorf("user text changed: %q", back[i].Text)
				}
			}
		})
	}
}

var u, a, call = agenttest.User, agenttest.Asst, agenttest.Call

func result(id, out string) transcript.Message { return agenttest.ToolResult(id, out, false) }

func TestWriteRepairs(t *testing.T) {
	exit1 := int32(1)
	tests := []struct {
		name string
		in   []transcript.Message
		want string // the written file's lines, compact: role:content
	}{
		{"orphan call gets a synthesized result",
			[]transcript.Message{u("go"), call("c1", "Bash", `{"command":"ls"}`), a("done")},
			`user:"go" | assistant:[tool_use c1 Bash {"command":"ls"}] | user:[tool_result c1 err ` + missingResult + `] | assistant:["done"]`},
		{"orphan result becomes text",
			[]transcript.Message{u("go"), result("zz", "out"), a("ok")},
			`user:"go" | user:["[cast: output of tool call zz, whose call is not in this transcript]\nout"] | assistant:["ok"]`},
		{"result after a user message is pulled up behind its call",
			[]transcript.Message{u("go"), call("c1", "Bash", `{"command":"ls"}`), u("hurry"), result("c1", "a.txt"), a("ok")},
			`user:"go" | assistant:[tool_use c1 Bash {"command":"ls"}] | user:[tool_result c1 a.txt] | user:"hurry" | assistant:["ok"]`},
		{"parallel calls with a duplicate id",
			[]transcript.Message{u("go"), call("c1", "Read", `{}`), call("c1", "Read", `{}`), result("c1", "one"), result("c1", "two")},
			`user:"go" | assistant:[tool_use c1 Read {} tool_use c1_2 Read {}] | user:[tool_result c1 one tool_result c1_2 two]`},
		{"codex exec_command becomes Bash, exit code stated",
			[]transcript.Message{u("go"), call("call_1", "exec_command", `{"cmd":"make","workdir":"/w"}`),
				{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "call_1", Output: "boom", ExitCode: &exit1, IsError: true}}},
			`user:"go" | assistant:[tool_use call_1 Bash {"command":"cd /w \u0026\u0026 make"}] | user:[tool_result call_1 err Exit code 1` + "\n" + `boom]`},
		{"gemini shell, odd id, MCP name and free-form input",
			[]transcript.Message{u("go"), call("a.b:1", "run_shell_command", `{"command":"ls"}`), result("a.b:1", "x"),
				call("p1", "mcp/server.tool", `"*** Begin Patch"`), result("p1", "ok")},
			`user:"go" | assistant:[tool_use a_b_1 Bash {"command":"ls"}] | user:[tool_result a_b_1 x] | assistant:[tool_use p1 mcp_server_tool {"input":"*** Begin Patch"}] | user:[tool_result p1 ok]`},
		{"internal rows never written, notices hidden, thinking dropped",
			[]transcript.Message{u("go"), {Kind: transcript.KindInternal, Text: "SECRET"}, {Kind: transcript.KindThinking, Text: "hmm"},
				a("hi"), {Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "now claude"}},
			`user:"go" | assistant:["hi"] | meta user:"\u003ccast-notice type=\"agent_switch\"\u003e\nnow claude\n\u003c/cast-notice\u003e"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Writer{}.Write(target(t), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			lines := checkFile(t, w.Path)
			var got []string
			for _, l := range lines {
				got = append(got, compact(l))
			}
			if g := strings.Join(got, " | "); g != tc.want {
				t.Errorf("got\n%s\nwant\n%s", g, tc.want)
			}
			raw, _ := os.ReadFile(w.Path)
			if strings.Contains(string(raw), "SECRET") {
				t.Error("an internal row leaked into the native transcript")
			}
		})
	}
}

// compact renders one written line for the table above.
func compact(l map[string]any) string {
	msg := l["message"].(map[string]any)
	prefix := ""
	if l["isMeta"] == true {
		prefix = "meta "
	}
	role := msg["role"].(string)
	if s, ok := msg["content"].(string); ok {
		b, _ := json.Marshal(s)
		return prefix + role + ":" + string(b)
	}
	var parts []string
	for _, b := range msg["content"].([]any) {
		bm := b.(map[string]any)
		switch bm["type"] {
		case "text":
			s, _ := json.Marshal(bm["text"])
			parts = append(parts, string(s))
		case "tool_use":
			in, _ := json.Marshal(bm["input"])
			parts = append(parts, fmt.Sprintf("tool_use %s %s %s", bm["id"], bm["name"], in))
		case "tool_result":
			e := ""
			if bm["is_error"] == true {
				e = "err "
			}
			parts = append(parts, fmt.Sprintf("tool_result %s %s%s", bm["tool_use_id"], e, bm["content"]))
		}
	}
	return prefix + role + ":[" + strings.Join(parts, " ") + "]"
}

func TestWriteTargetAndModel(t *testing.T) {
	tg := target(t)
	tg.Model = "claude-opus-4-8"
	msgs := []transcript.Message{u("a"), {Kind: transcript.KindAssistant, Text: "b", Model: "gpt-5-codex",
		Time: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}, u("c"), a("d")}
	w, err := Writer{}.Write(tg, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(tg.Home, "projects", Slug(tg.Cwd), NativeID("ses-1")+".jsonl"); w.Path != want {
		t.Errorf("path %s, want %s", w.Path, want)
	}
	lines := checkFile(t, w.Path)
	if m := lines[1]["message"].(map[string]any)["model"]; m != "gpt-5-codex" {
		t.Errorf("history model rewritten: %v", m)
	}
	if m := lines[3]["message"].(map[string]any)["model"]; m != "claude-opus-4-8" {
		t.Errorf("last assistant model = %v, want the target's", m)
	}
	if lines[1]["timestamp"] != "2026-05-01T00:00:00.000Z" {
		t.Errorf("message time not kept: %v", lines[1]["timestamp"])
	}
	// Writing again gives the same bytes (stable ids) and replaces the file.
	first, _ := os.ReadFile(w.Path)
	if _, err := (Writer{}).Write(tg, msgs); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(w.Path); string(again) != string(first) {
		t.Error("writing the same session twice changed the file")
	}
	if _, err := (Writer{}).Write(agents.Target{Home: tg.Home, Cwd: "rel"}, msgs); err == nil {
		t.Error("relative cwd accepted")
	}
}
