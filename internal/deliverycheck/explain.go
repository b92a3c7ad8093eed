package deliverycheck

import (
	"fmt"
	"slices"
	"strings"
)

// Explain renders violations with the requests they name: each request's
// clock, agent, session, the marks it held (the new turn's starred) and
// its items, texts clipped.
func Explain(h History, vs []Violation) string {
	if len(vs) == 0 {
		return "no violations\n"
	}
	ix := newIndex(h)
	var b strings.Builder
	fmt.Fprintf(&b, "%d violation(s):\n", len(vs))
	var reqs []int
	for _, v := range vs {
		fmt.Fprintf(&b, "  %s\n", v)
		for _, i := range append([]int{v.Request}, v.Others...) {
			if i >= 0 && !slices.Contains(reqs, i) {
				reqs = append(reqs, i)
			}
		}
	}
	slices.Sort(reqs)
	for _, i := range reqs {
		b.WriteString(ix.describe(i))
	}
	return b.String()
}

// describe renders request i.
func (ix *index) describe(i int) string {
	r := ix.h.Requests[i]
	v := ix.view(r)
	var marks []string
	for _, m := range v.marks {
		if slices.Contains(v.turn, m) {
			m += "*"
		}
		marks = append(marks, m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "request #%d at %d to %s (session %s, starts a turn: %v, refused: %v)\n  marks (* new turn): %s\n",
		i, r.At, r.Agent, v.session, v.isTurn, r.Refused, strings.Join(marks, " "))
	for _, it := range r.Items {
		if it.Role == "system" {
			continue
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", it.Role, it.Kind, clip(it.Text, 400))
	}
	return b.String()
}

// clip shortens s to about n bytes, keeping its start and end (where a
// prompt and its framing are), on one line.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n/2], "") + " … " + strings.ToValidUTF8(s[len(s)-n/2:], "")
}
