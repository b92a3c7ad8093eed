package kit

import (
	"fmt"
	"strings"
)

// NoticeTag is the tag a writer wraps cast's notices (agent switch,
// handoff, compaction summary, ...) in where its agent sends them to the
// model: they reach the model as context, not as something the user said,
// and the reader tells them from the agent's own records by the tag.
type NoticeTag string

// CastNotice is the tag of every writer but Claude's, whose files have
// carried "cast-notice" since before the tag was shared.
const CastNotice NoticeTag = "cast_notice"

// Wrap is text as a notice of type typ.
func (t NoticeTag) Wrap(typ, text string) string {
	return fmt.Sprintf("<%s type=%q>\n%s\n</%s>", t, typ, text, t)
}

// Unwrap is the inverse of Wrap on s with surrounding space trimmed; ok is
// false for any other text. A type is lower-case letters and underscores.
func (t NoticeTag) Unwrap(s string) (typ, text string, ok bool) {
	s = strings.TrimSpace(s)
	rest, found := strings.CutPrefix(s, "<"+string(t)+` type="`)
	if !found {
		return "", "", false
	}
	typ, rest, found = strings.Cut(rest, `">`)
	if !found || typ == "" || strings.TrimLeft(typ, "abcdefghijklmnopqrstuvwxyz_") != "" {
		return "", "", false
	}
	rest, found = strings.CutSuffix(rest, "</"+string(t)+">")
	if !found {
		return "", "", false
	}
	rest = strings.TrimPrefix(rest, "\n")
	return typ, strings.TrimSuffix(rest, "\n"), true
}
