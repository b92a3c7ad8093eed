package codex

import "strings"

// Notices (agent switch, handoff, compaction summary, ...) are written as
// developer messages wrapped in kit.CastNotice, so they reach the model
// as context rather than as something the user said, and come back as
// notices instead of being lost among Codex's own developer messages.

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
