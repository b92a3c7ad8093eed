package agents

import (
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
)

// Title is what an agent's own session picker should show for a rebuilt
// session: the first thing the user typed, on one line, at most max runes
// ("…" marks a cut). Writers whose format has a title or summary field
// put it there, so the picker neither shows a blank nor asks a model.
func Title(msgs []transcript.Message, max int) string {
	for _, m := range msgs {
		if m.Kind != transcript.KindUser {
			continue
		}
		t := strings.Join(strings.Fields(m.Text), " ")
		if t == "" {
			continue
		}
		if r := []rune(t); len(r) > max {
			t = string(r[:max-1]) + "…"
		}
		return t
	}
	return ""
}
