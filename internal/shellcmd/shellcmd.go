// Package shellcmd reads the command line out of a shell tool call, the
// one way the writers, slices and diffs that need it do it, and quotes argv
// words for showing them as a POSIX shell line.
package shellcmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// Of finds the command line in a shell tool call's arguments: a non-empty
// string under "command" or "cmd"; an argv array, where a shell's
// ["bash", "-lc", SCRIPT] gives SCRIPT and other words are quoted and
// joined; or Codex's local_shell "action" holding either. ok is false when
// there is none.
func Of(args map[string]any) (cmd string, ok bool) {
	for _, k := range []string{"command", "cmd"} {
		switch v := args[k].(type) {
		case string:
			if v != "" {
				return v, true
			}
		case []any:
			argv := make([]string, 0, len(v))
			for _, a := range v {
				s, ok := a.(string)
				if !ok {
					return "", false
				}
				argv = append(argv, s)
			}
			if len(argv) > 0 {
				return Join(argv), true
			}
		}
	}
	if a, ok := args["action"].(map[string]any); ok {
		return Of(a)
	}
	return "", false
}

// FromInput is Of for a tool call's input as JSON text; input that is not
// such an object comes back as it is (a JSON string unquoted).
func FromInput(input string) string {
	var obj map[string]any
	if json.Unmarshal([]byte(input), &obj) != nil {
		var s string
		if json.Unmarshal([]byte(input), &s) == nil {
			return s
		}
		return input
	}
	if c, ok := Of(obj); ok {
		return c
	}
	return input
}

// Join is argv as one shell line: a shell running a script (sh -c SCRIPT,
// bash -lc SCRIPT) is shown as the script, anything else word by word,
// quoted where needed.
func Join(argv []string) string {
	if len(argv) == 3 && isShell(argv[0]) && (argv[1] == "-lc" || argv[1] == "-c") {
		return argv[2]
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = Quote(a)
	}
	return strings.Join(words, " ")
}

func isShell(p string) bool {
	switch filepath.Base(p) {
	case "bash", "sh", "zsh", "dash":
		return true
	}
	return false
}

// Quote quotes one argv word for a POSIX shell line: as it is when no
// character in it means something to the shell, else in single quotes.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;<>()*?[]{}~!#") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
