package codex

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/shellcmd"
)

// foreignShells are other agents' shell tools. They are rendered as Codex's
// own exec_command so the model sees a tool it knows how to read, with the
// command under the argument name exec_command uses.
var foreignShells = map[string]bool{
	"bash":              true, // Claude Code "Bash", OpenCode and pi "bash"
	"run_shell_command": true, // Gemini CLI
	"run_terminal_cmd":  true, // Cursor
	"execute_command":   true,
	"shell_exec":        true,
}

// localShell is the name the reader gives Codex's own local_shell_call items;
// they are written back as exec_command because a function_call is the item
// shape every Codex version replays.
const localShell = "local_shell"

// toolName makes a name the Responses API accepts (^[A-Za-z0-9_-]{1,64}$):
// names from other agents (MCP servers with dots or colons) would otherwise
// be refused by a real provider even though Codex itself passes them on.
func toolName(name string) string { return cmp.Or(repair.FunctionChars(name, "_-"), "tool") }

// renderedCall is a tool call in the shape Codex replays.
type renderedCall struct {
	name   string
	args   string // function_call arguments (a JSON object as text)
	custom bool   // custom_tool_call: args is the raw free-form input
	shell  bool   // rendered as exec_command: exit codes go in the output
}

// renderCall maps a neutral tool call to a Codex call.
func renderCall(name, input string) renderedCall {
	in := strings.TrimSpace(input)
	// A JSON string literal is free-form input (the reader stores
	// custom_tool_call input this way, e.g. apply_patch's patch text).
	if strings.HasPrefix(in, `"`) {
		var s string
		if json.Unmarshal([]byte(in), &s) == nil {
			return renderedCall{name: toolName(name), args: s, custom: true}
		}
	}
	obj := map[string]any{}
	switch {
	case in == "":
	case json.Unmarshal([]byte(in), &obj) == nil:
	default:
		// Not an object: keep the text intact under one key so the
		// arguments stay a JSON object as the model expects.
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			v = input
		}
		obj = map[string]any{"input": v}
	}
	if name == localShell || foreignShells[strings.ToLower(name)] {
		if cmd, ok := shellcmd.Of(obj); ok {
			args := map[string]any{"cmd": cmd}
			for _, k := range []string{"workdir", "cwd", "directory", "dir_path", "working_directory"} {
				if d, ok := obj[k].(string); ok && d != "" {
					args["workdir"] = d
					break
				}
			}
			return renderedCall{name: "exec_command", args: mustJSON(args), shell: true}
		}
	}
	args := mustJSON(obj)
	if in != "" && json.Valid([]byte(in)) && strings.HasPrefix(in, "{") {
		args = input // already an object: keep the exact text
	}
	return renderedCall{name: toolName(name), args: args, shell: name == "exec_command"}
}

// renderOutput is the function_call_output text for a result. Codex's own
// exec_command output states the exit code; results from other agents carry
// it as a field, so it is stated the same way, and an error flag (which the
// Responses item has no field for) is stated in words.
func renderOutput(out string, exit *int32, isErr bool) string {
	if exit != nil && !strings.Contains(out, "Process exited with code") && !strings.Contains(out, "Exit code:") {
		return fmt.Sprintf("Process exited with code %d\nOutput:\n%s", *exit, out)
	}
	if isErr && exit == nil {
		return "Tool error:\n" + out
	}
	return out
}

// mustJSON encodes v without HTML escaping ("&&" in a command must stay
// "&&" for the model).
func mustJSON(v any) string { return string(marshal(v)) }
