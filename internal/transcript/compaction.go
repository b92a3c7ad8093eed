package transcript

import "strings"

// SinceCompaction is what a rebuilt native transcript holds of msgs: from
// the last compaction summary (a notice with text) on, or all of msgs when
// there is none. An agent that compacted its conversation no longer sends
// the turns before its summary; a rebuild for any agent must not send them
// either, or a conversation compacted to fit a window no longer fits after
// a switch. The turns before stay in the neutral copy, where the history
// tool and slices reach them.
func SinceCompaction(msgs []Message) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Kind == KindNotice && m.NoticeType == NoticeCompactionSummary && strings.TrimSpace(m.Text) != "" {
			return msgs[i:]
		}
	}
	return msgs
}
