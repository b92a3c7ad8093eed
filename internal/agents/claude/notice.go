package claude

import (
	"fmt"
	"regexp"
	"strings"
)

// Notices and the trimming note are written as isMeta user records: Claude
// Code sends them to the model but hides them in its UI, so they are
// context rather than something the user appears to have typed. The tag lets
// the reader tell them from the CLI's own meta records.
var noticeRE = regexp.MustCompile(`(?s)^<cast-notice type="([a-z_]+)">\n?(.*?)\n?</cast-notice>$`)

// omittedType marks the trimming note; it is not a neutral notice and is
// not read back (the neutral copy still has the omitted messages).
const omittedType = "omitted"

func wrapNotice(typ, text string) string {
	return fmt.Sprintf("<cast-notice type=%q>\n%s\n</cast-notice>", typ, text)
}

func unwrapNotice(s string) (typ, text string, ok bool) {
	m := noticeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
