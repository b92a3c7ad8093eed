package claude

import (
	"cmp"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/shellcmd"
)

// foreignShells are other agents' shell tools. Claude sees them as its own
// Bash so it reads the history as commands that ran, not as calls to tools
// it does not have.
var foreignShells = map[string]bool{
	"bash":                 true, // opencode, pi, grok
	"exec_command":         true, // codex
	"shell":                true, // older codex (argv form)
	"local_shell":          true, // codex local_shell_call
	"run_shell_command":    true, // gemini
	"run_terminal_cmd":     true, // cursor
	"run_terminal_command": true,
	"execute_command":      true,
}

// toolName makes a name the Anthropic API accepts (^[A-Za-z0-9_-]{1,64}$);
// MCP names from other agents carry dots, slashes or colons.
func toolName(name string) string { return cmp.Or(repair.FunctionChars(name, "_-"), "tool") }

// renderCall maps a neutral tool call to a Claude tool_use name and input.
// The input must be a JSON object: free-form input (codex's apply_patch
// text) or a non-object is kept whole under "input". Objects pass through
// untouched unless a foreign shell call is rewritten as Bash.
func renderCall(name, input string) (string, json.RawMessage) {
	in := strings.TrimSpace(input)
	shell := name != "Bash" && foreignShells[strings.ToLower(name)]
	if !shell && strings.HasPrefix(in, "{") && json.Valid([]byte(in)) {
		return toolName(name), json.RawMessage(in)
	}
	obj := map[string]any{}
	if in != "" && json.Unmarshal([]byte(in), &obj) != nil {
		obj = map[string]any{}
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			v = input
		}
		obj["input"] = v
	}
	if shell {
		if cmd, ok := shellcmd.Of(obj); ok {
			out := map[string]any{"command": cmd}
			for _, k := range []string{"description", "timeout"} {
				if v, ok := obj[k]; ok {
					out[k] = v
				}
			}
			for _, k := range []string{"workdir", "cwd", "dir_path", "directory", "working_directory"} {
				if d, ok := obj[k].(string); ok && d != "" {
					out["command"] = "cd " + shellcmd.Quote(d) + " && " + cmd
					break
				}
			}
			return "Bash", marshal(out)
		}
	}
	return toolName(name), marshal(obj)
}

// marshal encodes without HTML escaping (maps of decoded JSON always
// encode).
func marshal(v any) json.RawMessage { return kit.RawJSON(v, "null") }

var badID = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// toolID makes an id the Anthropic API accepts (^[a-zA-Z0-9_-]+$).
func toolID(id string) string {
	if plainID(id) {
		return id
	}
	return badID.ReplaceAllString(id, "_")
}

// plainID reports whether s is already [A-Za-z0-9_-]* (the common case,
// checked without a regexp because it runs once per tool call).
func plainID(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}
