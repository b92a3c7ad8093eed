package claude

import (
	"fmt"

	"github.com/cast-dev/cast/internal/transcript"
)

// Trimming defaults: above TrimAbove estimated tokens the transcript keeps
// about KeepTail tokens of the newest messages, leaving room under Claude's
// 200k window for the system prompt, tools and the reply.
const (
	DefaultTrimAbove = 180_000
	DefaultKeepTail  = 160_000
)

// estimate is a rough token count (4 bytes a token plus framing). It only
// has to be stable and proportional: the thresholds carry the margin.
func estimate(m transcript.Message) int {
	n := len(m.Text)
	if m.ToolCall != nil {
		n += len(m.ToolCall.Name) + len(m.ToolCall.Input)
	}
	if m.ToolResult != nil {
		n += len(m.ToolResult.Output)
	}
	return n/4 + 8
}

// indexed is a message with the seq it has in the session (its Seq, or its
// 1-based position when the caller has not assigned seqs).
type indexed struct {
	transcript.Message
	seq int64
}

// trim keeps the whole conversation when it fits; otherwise the tail that
// fits keepTail, every earlier user message (the human's instructions stay
// in force even when the work around them is cut) and, before the tail, a
// note with the count and the exact `cast read` range of what was left out.
// It returns the messages to render and how many were omitted.
func trim(msgs []indexed, above, keepTail int, sessionID string) ([]indexed, int) {
	total := 0
	for _, m := range msgs {
		total += estimate(m.Message)
	}
	if total <= above || len(msgs) == 0 {
		return msgs, 0
	}
	cut, size := len(msgs), 0
	for cut > 0 && size+estimate(msgs[cut-1].Message) <= keepTail {
		cut--
		size += estimate(msgs[cut].Message)
	}
	// A tail must not open with results whose calls were cut: they would be
	// orphans. They count as omitted instead.
	for cut < len(msgs) && msgs[cut].Kind == transcript.KindToolResult {
		cut++
	}
	if cut == len(msgs) { // the newest message alone is over budget: keep it anyway
		cut = len(msgs) - 1
	}
	var out []indexed
	omitted := 0
	var first, last int64
	for _, m := range msgs[:cut] {
		if m.Kind == transcript.KindUser {
			out = append(out, m)
			continue
		}
		omitted++
		if first == 0 {
			first = m.seq
		}
		last = m.seq
	}
	if omitted == 0 {
		return msgs, 0
	}
	note := transcript.Message{
		Kind:       transcript.KindNotice,
		NoticeType: omittedType,
		Text: fmt.Sprintf("To fit the context window, %d earlier messages of this session (seq %d to %d) are left out here; "+
			"the user's own messages from that part are kept above. The full history is kept by cast: "+
			"run `cast read %s %d:%d` to read the omitted part.", omitted, first, last, sessionID, first, last),
	}
	out = append(out, indexed{Message: note})
	return append(out, msgs[cut:]...), omitted
}
