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
	// The early shell tool answered with JSON:
	// {"output":"...","metadata":{"exit_code":0,"duration_seconds":0.1}}
	var js struct {
		Metadata struct {
			ExitCode *int32 `json:"exit_code"`
		} `json:"metadata"`
	}
	if len(output) > 0 && output[0] == '{' && json.Unmarshal([]byte(output), &js) == nil {
		return js.Metadata.ExitCode
	}
	return nil
}
