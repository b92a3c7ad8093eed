package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
)

// OneLine makes v, a value from outside cast (a native transcript's model,
// tool name or row id), a value of kind k that Check takes: bytes that are
// not UTF-8 become U+FFFD, control characters their escaped form (\n,
// \x1b, \u0085), and a value over k's limit its start and a digest of the
// whole, so two long ids that differ stay apart. The same v always gives
// the same result: a tool result still names its call. Only for kinds of
// free one-line text (Ident, ToolName, Title); it panics on another.
func OneLine(k Kind, v string) string {
	r, ok := rules[k]
	if !ok || (k != Ident && k != ToolName && k != Title) {
		panic(fmt.Sprintf("validate: OneLine of kind %d", k)) // a programming error
	}
	if r.check(v) != "" {
		v = escapeControls(strings.ToValidUTF8(v, "\uFFFD"))
	}
	if r.max > 0 && len(v) > r.max {
		sum := sha256.Sum256([]byte(v))
		tail := "…" + hex.EncodeToString(sum[:8])
		v = cutAt(v, r.max-len(tail)) + tail
	}
	return v
}

// escapeControls is s with each control character written as Go escapes
// it (strconv.Quote's form without the quotes).
func escapeControls(s string) string {
	var b strings.Builder
	for _, c := range s {
		if !unicode.IsControl(c) {
			b.WriteRune(c)
			continue
		}
		switch c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x80 {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				fmt.Fprintf(&b, `\u%04x`, c)
			}
		}
	}
	return b.String()
}
