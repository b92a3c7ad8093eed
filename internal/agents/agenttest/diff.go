package agenttest

import (
	"fmt"
	"strings"
)

// FakeDiff is an ASCII `git diff` of about size bytes, distinct per tag,
// ending in a line holding "END-"+tag: the big prompt of
// `git diff | cast exec` tests.
func FakeDiff(tag string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/%[1]s.go b/%[1]s.go\n--- a/%[1]s.go\n+++ b/%[1]s.go\n@@ -1,9999 +1,9999 @@\n", tag)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "-\told%d := compute(%q, %d)\n+\tnew%d := compute(%q, %d) // %s\n", i, tag, i*7919, i, tag, i*104729, tag)
	}
	b.WriteString("-// END-" + tag + "\n")
	return b.String()
}
