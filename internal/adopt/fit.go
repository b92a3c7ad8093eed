package adopt

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/validate"
)

// maxBody bounds what one message carries (text, tool input and output,
// images) for a store taking messages of limit bytes encoded. The store
// refuses a message over its limit and the whole batch with it; such a
// batch was sent again at every scan for ever and nothing later in the
// session was adopted. The margin is for the encoding and the message's
// other fields.
func maxBody(limit int) int {
	if limit <= 0 {
		limit = transcript.DefaultMaxMessageBytes
	}
	return limit - min(64<<10, limit/8)
}

// bodySize is what m carries, as maxBody and batchBytes count it.
func bodySize(m transcript.Message) int {
	sz := len(m.Text)
	if m.ToolCall != nil {
		sz += len(m.ToolCall.Input)
	}
	if m.ToolResult != nil {
		sz += len(m.ToolResult.Output)
	}
	for _, im := range m.Images {
		sz += len(im.Data)
	}
	return sz
}

// Fit is m in a form a store taking messages of limit bytes encoded
// takes (limit 0: transcript.DefaultMaxMessageBytes): its text, tool
// input and output valid UTF-8 and a prompt without NUL (wellFormed), the
// images that do not fit left out (the last first), then its text, tool
// output or tool input cut, with a sentence in its text saying what was
// left out and how large the message was. Its client id stays m's (for adoption the digest of what
// the file holds), so it is kept once however often it is sent. m itself
// is not changed. Adoption and the node's sync of its own turns both send
// through it: one row over the limit would otherwise be refused with its
// batch at every try.
func Fit(m transcript.Message, limit int) transcript.Message {
	m = wellFormed(m)
	size, most := bodySize(m), maxBody(limit)
	if size <= most {
		return m
	}
	budget := most - min(1024, most/8) // the sentence saying what was left out
	var left []string
	if n := len(m.Images); n > 0 {
		keep := m.Images[:0:0]
		rest := budget - (size - imagesSize(m.Images))
		dropped, droppedBytes := 0, 0
		for _, im := range m.Images {
			if len(im.Data) <= rest {
				keep, rest = append(keep, im), rest-len(im.Data)
				continue
			}
			dropped, droppedBytes = dropped+1, droppedBytes+len(im.Data)
		}
		m.Images = keep
		if dropped > 0 {
			left = append(left, fmt.Sprintf("%d of %d images (%d bytes)", dropped, n, droppedBytes))
		}
	}
	if over := bodySize(m) - budget; over > 0 && m.ToolCall != nil && len(m.ToolCall.Input) > 0 {
		tc := *m.ToolCall
		left = append(left, fmt.Sprintf("the tool input (%d bytes)", len(tc.Input)))
		tc.Input = "{}" // cut JSON is no JSON: none at all
		m.ToolCall = &tc
	}
	if over := bodySize(m) - budget; over > 0 && m.ToolResult != nil && len(m.ToolResult.Output) > 0 {
		tr := *m.ToolResult
		n := len(tr.Output)
		tr.Output = validate.Clip(tr.Output, max(n-over, 0))
		left = append(left, fmt.Sprintf("%d bytes of the tool output", n-len(tr.Output)))
		m.ToolResult = &tr
	}
	if over := bodySize(m) - budget; over > 0 {
		n := len(m.Text)
		m.Text = validate.Clip(m.Text, max(n-over, 0))
		left = append(left, fmt.Sprintf("%d bytes of the text", n-len(m.Text)))
	}
	note := fmt.Sprintf("[cast: this message was %d bytes, more than a stored message holds (%d); left out: ", size, most)
	for i, l := range left {
		if i > 0 {
			note += ", "
		}
		note += l
	}
	note += "; the agent's own file still has it whole]"
	if m.Text != "" {
		m.Text += "\n\n"
	}
	m.Text += note
	return m
}

func imagesSize(ims []transcript.Image) int {
	n := 0
	for _, im := range ims {
		n += len(im.Data)
	}
	return n
}

// wellFormed is m with what the wire or the store refuses in a message's
// text replaced: bytes that are not UTF-8 (a reader keeps a tool's input
// as the file's raw JSON, which a hand edit or another writer may leave
// in Latin-1; protobuf cannot encode such a string) by U+FFFD, and a NUL
// in a prompt (pasted binary; no agent takes one) left out; and the
// one-line values the file gave it (model, row id, tool call id and name)
// in the form the API takes (validate.OneLine: controls escaped, a value
// over its limit shortened, the same way each time so a result still
// names its call), a tool call or result the file gave no id (or a call
// no name) a stand-in, which pairs with nothing as the file's did not.
// Either failed its batch at every try, and nothing after it was kept.
func wellFormed(m transcript.Message) transcript.Message {
	text := m.Text
	if m.Kind == transcript.KindUser {
		text = strings.ReplaceAll(text, "\x00", "")
	}
	m.Text = strings.ToValidUTF8(text, "\uFFFD")
	m.Model, m.NativeID = validate.OneLine(validate.Ident, m.Model), validate.OneLine(validate.Ident, m.NativeID)
	if c := m.ToolCall; c != nil {
		tc := *c
		tc.Input = strings.ToValidUTF8(tc.Input, "\uFFFD")
		tc.ID, tc.Name = validate.OneLine(validate.Ident, tc.ID), validate.OneLine(validate.ToolName, tc.Name)
		tc.ID, tc.Name = cmp.Or(tc.ID, noID(m)), cmp.Or(tc.Name, "unknown")
		m.ToolCall = &tc
	}
	if r := m.ToolResult; r != nil {
		tr := *r
		tr.Output = strings.ToValidUTF8(tr.Output, "\uFFFD")
		tr.CallID = cmp.Or(validate.OneLine(validate.Ident, tr.CallID), noID(m))
		m.ToolResult = &tr
	}
	return m
}

// noID is the stand-in id of a tool call or result the file gave none:
// its row's own (the client id), unlike any id an agent gives.
func noID(m transcript.Message) string {
	return validate.OneLine(validate.Ident, "cast-noid-"+m.ClientID)
}
