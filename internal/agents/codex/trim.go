package codex

import (
	"fmt"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/transcript"
)

// Limits of a rebuilt Codex history. The caps keep a resume inside what
// Codex replays comfortably; they count only model-visible response items
// (the event_msg copies for the UI are not sent to the model).
const (
	MaxItems = 4096
	MaxBytes = 240 * 1024
	// MaxItemBytes clips one text (user, assistant, tool input or output)
	// only when it alone would take more than half of MaxBytes, so a single
	// item can never push the whole history out. Anything smaller is
	// written whole: how much of a long tool output the model then sees is
	// Codex's own truncation policy (the model's, or the user's
	// tool_output_token_limit), applied on resume exactly as it is to
	// outputs Codex produced itself; cast must not cut first.
	MaxItemBytes = MaxBytes / 2
)

// clipText keeps the head and tail of s within max bytes and says in the
// middle how much is gone and how to read it whole.
func clipText(s string, max int, sessionID string, seq int64) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf("\n\n[... cast clipped %%d bytes from the middle of this message; read it whole with: cast read %s %d:%d ...]\n\n", sessionID, seq, seq)
	room := max - len(note) - 10
	if room < 64 {
		room = 64
	}
	head := cutRunes(s, room/2, true)
	tail := cutRunes(s, room-len(head), false)
	gone := len(s) - len(head) - len(tail)
	return head + fmt.Sprintf(note, gone) + tail
}

// cutRunes returns at most n bytes from the start (or end) of s without
// splitting a UTF-8 sequence.
func cutRunes(s string, n int, fromStart bool) string {
	if n >= len(s) {
		return s
	}
	if fromStart {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n]
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// seqOf is the message's seq, or its 1-based position in the slice cast was
// given when it has none yet (an import not stored yet).
func seqOf(m transcript.Message, pos int) int64 {
	if m.Seq > 0 {
		return m.Seq
	}
	return int64(pos + 1)
}

// prepared is a neutral message ready to render, with the seq pointers use.
type prepared struct {
	msg transcript.Message
	seq int64
}

// prepare drops what Codex never gets (internal rows, empty texts, invalid
// rows) and clips oversized items.
func prepare(msgs []transcript.Message, sessionID string) []prepared {
	msgs = repair.UniqueCallIDs(msgs)
	var out []prepared
	for i, m := range msgs {
		if !keep(m) {
			continue
		}
		seq := seqOf(m, i)
		switch m.Kind {
		case transcript.KindToolResult:
			r := *m.ToolResult
			r.Output = clipText(r.Output, MaxItemBytes, sessionID, seq)
			m.ToolResult = &r
		case transcript.KindToolCall:
			if len(m.ToolCall.Input) > MaxItemBytes {
				c := *m.ToolCall
				// Clipped JSON is no longer JSON: keep it as text under one key.
				c.Input = mustJSON(map[string]string{"clipped_input": clipText(c.Input, MaxItemBytes, sessionID, seq)})
				m.ToolCall = &c
			}
		default:
			m.Text = clipText(m.Text, MaxItemBytes, sessionID, seq)
		}
		out = append(out, prepared{msg: m, seq: seq})
	}
	return out
}

// cost is what a rendering holds against the caps.
func cost(lines []line) (items, bytes int) {
	for _, l := range lines {
		if l.isModelItem() {
			items++
			bytes += len(l.payload)
		}
	}
	return
}

// build renders ps within the caps. When the whole history does not fit,
// the oldest messages are left out, from a user turn on so no tool pair is
// split, and a developer note (which the reader skips, so it never comes
// back as content) says which seq range to read with `cast read`.
func build(ps []prepared, sessionID string) (lines []line, omitted int) {
	return buildCapped(ps, sessionID, MaxItems, MaxBytes)
}

// buildCapped is build with explicit caps, so tests can reach the item cap
// on its own (with real texts the byte cap binds first: 240 KB / 4,096 is 60
// bytes an item, less than the smallest message item).
func buildCapped(ps []prepared, sessionID string, maxItems, maxBytes int) (lines []line, omitted int) {
	msgs := make([]transcript.Message, len(ps))
	for i, p := range ps {
		msgs[i] = p.msg
	}
	lines = render(msgs)
	items, bytes := cost(lines)
	if items <= maxItems && bytes <= maxBytes {
		return lines, 0
	}
	// Cost per message, then the shortest prefix to drop.
	itemsAt := make([]int, len(msgs)+1)
	bytesAt := make([]int, len(msgs)+1)
	for _, l := range lines {
		if l.isModelItem() && l.msg >= 0 {
			itemsAt[l.msg]++
			bytesAt[l.msg] += len(l.payload)
		}
	}
	const noteReserve = 1024
	k := 0
	for k < len(msgs) && (items > maxItems-1 || bytes > maxBytes-noteReserve) {
		items -= itemsAt[k]
		bytes -= bytesAt[k]
		k++
	}
	for {
		k = nextTurn(msgs, k)
		note := fmt.Sprintf("[cast] The %d earliest messages of this conversation (seq %d-%d) are left out here to fit Codex's history limit. Read them with: cast read %s %d:%d",
			k, ps[0].seq, ps[k-1].seq, sessionID, ps[0].seq, ps[k-1].seq)
		var ts = msgs[k-1].Time
		lines = append([]line{{typ: lineResponseItem, payload: marshal(msgItem{Type: "message", Role: "developer",
			Content: []contentPart{{Type: "input_text", Text: note}}}), ts: ts, msg: -1}}, render(msgs[k:])...)
		if i, b := cost(lines); (i <= maxItems && b <= maxBytes) || k >= len(msgs) {
			return lines, k
		}
		k++
	}
}

// nextTurn moves a cut forward to the next user message so the kept part
// starts a turn; without a later user message it keeps the cut where it is.
func nextTurn(msgs []transcript.Message, k int) int {
	if k < 1 {
		k = 1
	}
	for j := k; j < len(msgs); j++ {
		if msgs[j].Kind == transcript.KindUser {
			return j
		}
	}
	return min(k, len(msgs))
}
