package gemini

import (
	"strings"
	"testing"
)

func TestToolName(t *testing.T) {
	for in, want := range map[string]string{
		"run_shell_command":            "run_shell_command",
		"mcp.server:tool-x":            "mcp.server:tool-x",
		"a b/é":                        "a_b__",
		"":                             "unknown_tool",
		"9lives":                       "_9lives",
		".hidden":                      "_.hidden",
		strings.Repeat("x", 100):       strings.Repeat("x", 64),
		"1" + strings.Repeat("x", 100): "_1" + strings.Repeat("x", 62),
	} {
		if got := toolName(in); got != want {
			t.Errorf("toolName(%q) = %q, want %q", in, got, want)
		}
	}
}
