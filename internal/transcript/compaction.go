package transcript

import "strings"

// SinceCompaction is what a rebuilt native transcript holds of msgs: from
// the last compaction summary (a notice with text) on, or all of msgs when
// there is none. An agent that compacted its conversation no longer sends
// the turns before its summary; a rebuild for any agent must not send them
// either, or a conversation compacted to fit a window no longer fits after
// a switch. The turns before stay in the neutral copy, where the history
// tool and slices reach them.
//
// The user messages right before the summary are the prompts of the turn
// the CLI compacted at the start of (it compacts, then takes the prompt,
// but the store held the prompt when it was sent, before the summary was
// read): the summary does not hold them, so they follow it, unless the
// summary holds one's text; in a copy timed no earlier than the summary.
func SinceCompaction(msgs []Message) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Kind != KindNotice || m.NoticeType != NoticeCompactionSummary || strings.TrimSpace(m.Text) == "" {
			continue
		}
		start := i
		for start > 0 && msgs[start-1].Kind == KindUser {
			start--
		}
		out := []Message{*m}
		for _, u := range msgs[start:i] {
			if text := strings.TrimSpace(u.Text); text != "" && strings.Contains(m.Text, text) {
				continue
			}
			// Not before the summary in time either: a writer that
			// orders by time (OpenCode) put it back before the summary.
			if u.Time.Before(m.Time) {
				u.Time = m.Time
			}
			out = append(out, u)
		}
		if len(out) == 1 {
			return msgs[i:]
		}
		return append(out, msgs[i+1:]...)
	}
	return msgs
}

// keptHeader introduces, in a compaction summary notice, the user's
// messages the CLI kept verbatim beside its summary.
const keptHeader = "The user's messages before this summary, kept with it:"

// WithKept is a compaction summary's notice text holding the user's
// messages the CLI kept verbatim beside it (Codex's replacement history,
// the newest entries Gemini keeps after its summary), which the summary
// does not restate. They are before the notice in the neutral copy, and a
// rebuild starts at the notice (SinceCompaction): without them in it, a
// switch after the compaction lost them.
func WithKept(summary string, kept []string) string {
	if len(kept) == 0 {
		return summary
	}
	return summary + "\n\n" + keptHeader + "\n\n" + strings.Join(kept, "\n\n")
}
