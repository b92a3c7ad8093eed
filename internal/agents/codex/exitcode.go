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

// wrappingTools are Codex's own tools that answered in the exec wrapper
// below: the early shell tools, and apply_patch (through 0.6x, which runs
// the patch as a process and reports its exit code the same way).
func wrappingTools(tool string) bool { return shellTools[tool] || tool == "apply_patch" }

// unwrapShellJSON reads the JSON the early shell tool (Codex 0.2x-0.4x)
// and apply_patch (0.66) answered with, {"output":"...","metadata":
// {"exit_code":0,"duration_seconds":0.1}}, into the output text and exit
// code. ok is false for anything else, which is kept as it is: only an
// object of exactly those two keys, from one of those tools (or a call not
// in the file), is the wrapper; an MCP tool's answer of that shape is data.
func unwrapShellJSON(tool, s string) (text string, exit *int32, ok bool) {
	if (tool != "" && !wrappingTools(tool)) || len(s) == 0 || s[0] != '{' {
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

// renderedExit is how renderOutput states an exit code the tool's own text
// does not carry.
var renderedExit = regexp.MustCompile(`\AProcess exited with code (-?\d+)\nOutput:\n`)

// unwrapRendered reads back what renderOutput made of an apply_patch
// result with an exit code (one read from the 0.66 wrapper), so a rewrite
// keeps its text and exit code as they were. Other tools are left as
// they are: a shell tool's text states its exit code itself.
func unwrapRendered(tool, s string) (text string, exit *int32, ok bool) {
	if tool != "apply_patch" {
		return "", nil, false
	}
	m := renderedExit.FindStringSubmatch(s)
	if m == nil {
		return "", nil, false
	}
	n, err := strconv.ParseInt(m[1], 10, 32)
	if err != nil {
		return "", nil, false
	}
	c := int32(n)
	return s[len(m[0]):], &c, true
}
