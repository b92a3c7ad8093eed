package runner

import (
	"fmt"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/agents"
)

// promptTooLong says why the CLI of a cannot take input, the prompt as it
// goes on stdin, or "" when it can. Such a prompt is refused before the CLI
// starts: some CLIs would cut it silently (Gemini), others refuse it only
// after starting up (Codex, whose driver delivers a longer prompt as
// history instead: deliverLarge), and the message should say the limit.
func promptTooLong(a agents.Agent, input string) string {
	if limit := a.Commands.MaxPromptBytes; limit > 0 && len(input) > limit {
		return fmt.Sprintf("the prompt is %d bytes; %s reads at most %d", len(input), a.DisplayName, limit)
	}
	// A string has at least as many bytes as code points: count only when
	// the bytes are over.
	if limit := a.Commands.MaxPromptChars; limit > 0 && len(input) > limit {
		if n := utf8.RuneCountInString(input); n > limit {
			return fmt.Sprintf("the prompt is %d characters; %s takes at most %d characters in one message (its maximum length)", n, a.DisplayName, limit)
		}
	}
	return ""
}
