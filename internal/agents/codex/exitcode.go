package codex

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// shellTools are the Codex tools whose output reports a process exit code.
// Only their outputs are searched: an MCP tool may print "Exit code: 1" as
// plain data and must not be mistaken for a failed process.
var shellTools = map[string]bool{
	"exec_command":    true, // unified exec, 0.1xx
	"write_stdin":     true, // unified exec follow-up; reports the exit once the process ends
	"shell":           true, // older shell tool
	"shell_command":   true,
	"local_shell":     true,
	"container.exec":  true,
	"container_exec":  true,
	"unified_exec":    true,
	"run_shell":       true,
	"execute_command": true,
}

var exitPatterns = []*regexp.Regexp{
	// unified exec: "Process exited with code 0"
	regexp.MustCompile(`(?m)^Process exited with code (-?\d+)\s*$`),
	// shell tool (0.2x-0.4x): "Exit code: 0\nWall time: ..."
	regexp.MustCompile(`(?m)^Exit code: (-?\d+)\s*$`),
}

// exitCode extracts the exit code a shell tool's output reports, or nil.
func exitCode(tool, output string) *int32 {
	if !shellTools[tool] {
		return nil
	}
	for _, re := range exitPatterns {
		if m := re.FindStringSubmatch(output); m != nil {
			if n, err := strconv.ParseInt(m[1], 10, 32); err == nil {
				c := int32(n)
				return &c
			}
		}
	}
	return nil
}

// unwrapShellJSON reads the JSON the early shell tool (Codex 0.2x-0.4x)
// answered with, {"output":"...","metadata":{"exit_code":0,
// "duration_seconds":0.1}}, into the output text and exit code. ok is false
// for anything else, which is kept as it is: only an object of exactly those
// two keys, from a shell tool (or a call not in the file), is the wrapper.
func unwrapShellJSON(tool, s string) (text string, exit *int32, ok bool) {
	if (tool != "" && !shellTools[tool]) || len(s) == 0 || s[0] != '{' {
		return "", nil, false
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &keys) != nil || len(keys) != 2 || keys["output"] == nil || keys["metadata"] == nil {
		return "", nil, false
	}
	var meta struct {
		ExitCode *int32 `json:"exit_code"`
	}
	if json.Unmarshal(keys["output"], &text) != nil || json.Unmarshal(keys["metadata"], &meta) != nil {
		return "", nil, false
	}
	return text, meta.ExitCode, true
}
