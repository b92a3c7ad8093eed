package grok

import (
	"fmt"
	"strings"
)

// unreserved reports RFC 3986 unreserved bytes, the only ones Grok leaves
// as they are in a project folder name.
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// projectDir is Grok's folder name for a cwd: every byte outside the
// unreserved set percent-encoded (so "/" is %2F and " " is %20).
func projectDir(cwd string) string {
	var b strings.Builder
	for i := 0; i < len(cwd); i++ {
		c := cwd[i]
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
