package codex

import (
	"fmt"
	"regexp"
	"strings"
)

// Notices (agent switch, handoff, compaction summary, ...) are written as
// developer messages wrapped in a tag the reader recognises, so they reach
// the model as context rather than as something the user said, and come back
// as notices instead of being lost among Codex's own developer messages.
var noticeRE = regexp.MustCompile(`(?s)^<cast_notice type="([a-z_]+)">\n?(.*?)\n?</cast_notice>$`)

func wrapNotice(typ, text string) string {
	return fmt.Sprintf("<cast_notice type=%q>\n%s\n</cast_notice>", typ, text)
}

func unwrapNotice(s string) (typ, text string, ok bool) {
	m := noticeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// harnessPrefixes mark user-role messages Codex itself injects (environment,
// AGENTS.md, permissions). They are regenerated on every resume, so reading
// them as user turns would duplicate them into every rebuilt transcript.
var harnessPrefixes = []string{
	"<environment_context>",
	"<user_instructions>",
	"# AGENTS.md instructions for",
	"<permissions instructions>",
	"<skills_instructions>",
	"<turn_aborted>",
	largePromptTag, // cast's own pointer to a prompt delivered as history
}

func isHarnessText(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	for _, p := range harnessPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
