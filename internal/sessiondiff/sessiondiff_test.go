package sessiondiff

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

type call struct{ name, input string }

// conv builds a transcript: a user message, then each call with a result,
// then an answer, as every agent's sessions look once in the neutral copy.
func conv(agent string, calls ...call) []transcript.Message {
	msgs := []transcript.Message{{Kind: transcript.KindUser, Text: "do it"}}
	for i, c := range calls {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			transcript.Message{Kind: transcript.KindToolCall, Agent: agent, ToolCall: &transcript.ToolCall{ID: id, Name: c.name, Input: c.input}},
			transcript.Message{Kind: transcript.KindToolResult, Agent: agent, ToolResult: &transcript.ToolResult{CallID: id, Output: "ok"}},
		)
	}
	return append(msgs, transcript.Message{Kind: transcript.KindAssistant, Agent: agent, Text: "done"})
}

func TestSummarize(t *testing.T) {
	const cwd = "/home/u/proj"
	cases := []struct {
		name     string
		msgs     []transcript.Message
		tools    []ToolUse
		files    []string
		commands []string
	}{
		{"empty", nil, nil, nil, nil},
		{"claude", conv("claude",
			call{"Read", `{"file_path":"/home/u/proj/main.go"}`},
			call{"Edit", `{"file_path":"/home/u/proj/main.go","old_string":"a","new_string":"b"}`},
			call{"Write", `{"file_path":"/home/u/proj/docs/new.md","content":"x"}`},
			call{"Bash", `{"command":"go test ./...","description":"Run tests"}`},
			call{"Grep", `{"pattern":"TODO","path":"/home/u/proj/internal"}`},
			call{"NotebookEdit", `{"notebook_path":"/home/u/proj/nb.ipynb","new_source":"x"}`},
			call{"Edit", `{"file_path":"/etc/hosts","old_string":"a","new_string":"b"}`},
			call{"MultiEdit", `{"file_path":"/home/u/proj/main.go","edits":[{"old_string":"b","new_string":"c"}]}`},
			call{"Bash", `{"command":"go test ./..."}`},
		),
			[]ToolUse{{"Read", 1}, {"Edit", 2}, {"Write", 1}, {"Bash", 2}, {"Grep", 1}, {"NotebookEdit", 1}, {"MultiEdit", 1}},
			[]string{"main.go", "docs/new.md", "nb.ipynb", "/etc/hosts"},
			[]string{"go test ./...", "go test ./..."}},
		{"codex", conv("codex",
			call{"exec_command", `{"cmd":"ls -la","workdir":"/home/u/proj"}`},
			call{"apply_patch", `"*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: src/new.rs\n+x\n*** Delete File: old.rs\n*** Update File: a.rs\n*** Move to: b.rs\n*** End Patch\n"`},
			call{"shell", `{"command":["bash","-lc","cargo build"]}`},
			call{"local_shell", `{"type":"exec","command":["git","commit","-m","fix it"]}`},
			call{"apply_patch", `{"input":"*** Begin Patch\n*** Update File: /home/u/proj/src/lib.rs\n*** End Patch"}`},
		),
			[]ToolUse{{"exec_command", 1}, {"apply_patch", 2}, {"shell", 1}, {"local_shell", 1}},
			[]string{"src/lib.rs", "src/new.rs", "old.rs", "a.rs", "b.rs"},
			[]string{"ls -la", "cargo build", "git commit -m 'fix it'"}},
		{"gemini", conv("gemini",
			call{"read_file", `{"absolute_path":"/home/u/proj/README.md"}`},
			call{"write_file", `{"file_path":"/home/u/proj/out.txt","content":"hi"}`},
			call{"replace", `{"file_path":"/home/u/proj/README.md","old_string":"a","new_string":"b"}`},
			call{"run_shell_command", `{"command":"npm test","description":"tests","directory":"web"}`},
			call{"list_directory", `{"path":"/home/u/proj"}`},
			call{"search_file_content", `{"pattern":"x","path":"/home/u/proj/src"}`},
		),
			[]ToolUse{{"read_file", 1}, {"write_file", 1}, {"replace", 1}, {"run_shell_command", 1}, {"list_directory", 1}, {"search_file_content", 1}},
			[]string{"README.md", "out.txt"},
			[]string{"npm test"}},
		{"pi", conv("pi",
			call{"read", `{"path":"src/app.ts"}`},
			call{"edit", `{"path":"src/app.ts","oldText":"a","newText":"b"}`},
			call{"write", `{"path":"./src/../notes.md","content":"x"}`},
			call{"bash", `{"command":"npm run build"}`},
		),
			[]ToolUse{{"read", 1}, {"edit", 1}, {"write", 1}, {"bash", 1}},
			[]string{"src/app.ts", "notes.md"},
			[]string{"npm run build"}},
		{"opencode", conv("opencode",
			call{"read", `{"filePath":"/home/u/proj/index.ts"}`},
			call{"edit", `{"filePath":"/home/u/proj/index.ts","oldString":"a","newString":"b"}`},
			call{"bash", `{"command":"bun test","description":"Runs tests"}`},
			call{"patch", `{"patchText":"--- a/lib/x.ts\n+++ b/lib/x.ts\n@@ -1 +1 @@\n-a\n+b\n--- a/gone.ts\n+++ /dev/null\n"}`},
			call{"glob", `{"pattern":"**/*.ts","path":"/home/u/proj"}`},
		),
			[]ToolUse{{"read", 1}, {"edit", 1}, {"bash", 1}, {"patch", 1}, {"glob", 1}},
			[]string{"index.ts", "lib/x.ts", "gone.ts"},
			[]string{"bun test"}},
		{"mixed after a switch, with notices and odd input", append(append(conv("claude",
			call{"Edit", `{"file_path":"/home/u/proj/a.go"}`}),
			transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "Now using Codex"}),
			conv("codex",
				call{"exec_command", `{"cmd":"go vet ./..."}`},
				call{"mcp__files__write_file", `{"path":"/home/u/proj/b.go"}`},
				call{"Bash", `not json at all`},
				call{"Edit", ``},
				call{"view_image", `{"path":"/tmp/shot.png"}`},
			)...),
			[]ToolUse{{"Edit", 2}, {"exec_command", 1}, {"mcp__files__write_file", 1}, {"Bash", 1}, {"view_image", 1}},
			[]string{"a.go", "b.go", "/tmp/shot.png"},
			[]string{"go vet ./...", "not json at all"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.msgs, cwd)
			if !reflect.DeepEqual(s.Tools, tc.tools) {
				t.Errorf("tools\n got %v\nwant %v", s.Tools, tc.tools)
			}
			if !reflect.DeepEqual(s.FilesTouched, tc.files) {
				t.Errorf("files\n got %q\nwant %q", s.FilesTouched, tc.files)
			}
			if !reflect.DeepEqual(s.Commands, tc.commands) {
				t.Errorf("commands\n got %q\nwant %q", s.Commands, tc.commands)
			}
		})
	}
}

func TestSummarizeWithoutCwdKeepsPaths(t *testing.T) {
	s := Summarize(conv("claude", call{"Write", `{"file_path":"/home/u/proj/a.go"}`}), "")
	if !reflect.DeepEqual(s.FilesTouched, []string{"/home/u/proj/a.go"}) {
		t.Fatalf("files %q", s.FilesTouched)
	}
}
