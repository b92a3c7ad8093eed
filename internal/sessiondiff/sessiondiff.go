// Package sessiondiff summarizes what a session's tool calls did, from the
// neutral transcript alone: which tools were used how often, which files
// they named, which shell commands ran. It is pure: no I/O, no git.
package sessiondiff

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/shellcmd"
	"github.com/cast-dev/cast/internal/transcript"
)

// ToolUse is one tool and how many calls it got.
type ToolUse struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// Summary is what the tool calls of a transcript did.
type Summary struct {
	Tools        []ToolUse // in first-use order
	FilesTouched []string  // deduplicated, first-touch order
	Commands     []string  // shell command lines in order, repeats kept
}

// pathKeys are the input fields agents name a file in: Claude
// (file_path, notebook_path), OpenCode (filePath), pi and Gemini (path,
// absolute_path).
var pathKeys = []string{"file_path", "filePath", "notebook_path", "path", "absolute_path"}

// searchTools take a directory to search in "path", not a file they touch.
var searchTools = map[string]bool{
	"grep": true, "glob": true, "ls": true, "list": true, "find": true,
	"list_directory": true, "search_file_content": true, "codebase_search": true,
	"list_dir": true, "file_search": true,
}

// shellTools are the agents' shell tools: Claude Bash, Codex exec_command
// (and shell/local_shell), Gemini run_shell_command, OpenCode/pi bash, ...
var shellTools = map[string]bool{
	"bash": true, "exec_command": true, "shell": true, "local_shell": true, "shell_command": true,
	"run_shell_command": true, "run_terminal_cmd": true, "run_terminal_command": true,
	"execute_command": true, "shell_exec": true,
}

// patchKeys hold free-form patch text in a tool input object.
var patchKeys = []string{"input", "patch", "patchText", "patch_text", "diff"}

// Summarize reads the tool calls of msgs. Paths inside cwd are made
// relative to it so the same file named two ways is listed once; pass ""
// to keep paths as the agents wrote them.
func Summarize(msgs []transcript.Message, cwd string) Summary {
	var s Summary
	count := map[string]int{}
	seen := map[string]bool{}
	touch := func(p string) {
		p = normPath(p, cwd)
		if p == "" || seen[p] {
			return
		}
		seen[p] = true
		s.FilesTouched = append(s.FilesTouched, p)
	}
	for _, m := range msgs {
		if m.Kind != transcript.KindToolCall || m.ToolCall == nil || m.ToolCall.Name == "" {
			continue
		}
		name := m.ToolCall.Name
		if _, ok := count[name]; !ok {
			s.Tools = append(s.Tools, ToolUse{Name: name})
		}
		count[name]++
		files, cmd := inspectCall(name, m.ToolCall.Input)
		for _, f := range files {
			touch(f)
		}
		if cmd != "" {
			s.Commands = append(s.Commands, cmd)
		}
	}
	for i := range s.Tools {
		s.Tools[i].Count = count[s.Tools[i].Name]
	}
	return s
}

// inspectCall returns the files a call names and, for a shell tool, its
// command line. Shell commands are not parsed for files.
func inspectCall(name, input string) (files []string, command string) {
	lower := strings.ToLower(name)
	// MCP tools arrive as "server__tool" or "server.tool": judge the tool part.
	if i := strings.LastIndexAny(lower, ".:/"); i >= 0 {
		lower = lower[i+1:]
	}
	if i := strings.LastIndex(lower, "__"); i >= 0 {
		lower = lower[i+2:]
	}
	in := strings.TrimSpace(input)
	var v any
	if in != "" && json.Unmarshal([]byte(in), &v) != nil {
		v = input // not JSON: free-form text
	}
	obj, _ := v.(map[string]any)
	if shellTools[lower] {
		if obj != nil {
			command = shellCommand(obj)
		} else if s, ok := v.(string); ok {
			command = strings.TrimSpace(s)
		}
		return nil, command
	}
	if strings.Contains(lower, "patch") {
		var text string
		if s, ok := v.(string); ok {
			text = s // Codex custom_tool_call: the patch as a JSON string
		}
		for _, k := range patchKeys {
			if s, ok := obj[k].(string); ok && s != "" && text == "" {
				text = s
			}
		}
		files = append(files, patchFiles(text)...)
	}
	if obj != nil && !searchTools[lower] {
		for _, k := range pathKeys {
			if p, ok := obj[k].(string); ok && strings.TrimSpace(p) != "" {
				files = append(files, p)
				break
			}
		}
		// Batch edits (e.g. a list of {file_path, ...}) name one file each.
		for _, k := range []string{"edits", "files", "changes"} {
			list, _ := obj[k].([]any)
			for _, e := range list {
				if eo, ok := e.(map[string]any); ok {
					for _, pk := range pathKeys {
						if p, ok := eo[pk].(string); ok && strings.TrimSpace(p) != "" {
							files = append(files, p)
							break
						}
					}
				}
			}
		}
	}
	return files, ""
}

// patchFiles finds the files a patch changes: Codex's "*** Update File:"
// envelope, or a unified diff's "+++ b/..." headers.
func patchFiles(text string) []string {
	var files []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if rest, ok := strings.CutPrefix(line, p); ok {
				files = append(files, strings.TrimSpace(rest))
			}
		}
		if rest, ok := strings.CutPrefix(line, "+++ "); ok {
			rest = strings.TrimSpace(rest)
			if i := strings.IndexByte(rest, '\t'); i >= 0 {
				rest = rest[:i] // "+++ b/x\t2024-01-01 ..." timestamps
			}
			if rest != "/dev/null" {
				files = append(files, strings.TrimPrefix(rest, "b/"))
			}
		}
		if rest, ok := strings.CutPrefix(line, "--- "); ok && strings.HasPrefix(rest, "a/") {
			// A deletion has "+++ /dev/null"; its file is on the "---" side.
			files = append(files, strings.TrimPrefix(strings.TrimSpace(rest), "a/"))
		}
	}
	return files
}

// normPath cleans p and makes it relative to cwd when it lies inside it.
func normPath(p, cwd string) string {
	p = strings.TrimSpace(p)
	if p == "" {
		return ""
	}
	p = filepath.Clean(p)
	if cwd != "" && filepath.IsAbs(p) && filepath.IsAbs(cwd) {
		if rel, err := filepath.Rel(filepath.Clean(cwd), p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel
		}
	}
	return p
}

// shellCommand is the command line of a shell call (shellcmd.Of), trimmed.
func shellCommand(obj map[string]any) string {
	c, _ := shellcmd.Of(obj)
	return strings.TrimSpace(c)
}
