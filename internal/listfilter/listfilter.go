// Package listfilter parses the filter of cast's List RPCs: a small
// subset of AIP-160, one conjunction of comparisons,
//
//	filter = term { "AND" term }
//	term   = field ( "=" | "!=" ) value
//	field  = a name the listing declares
//	value  = "a quoted string" (\" and \\ escape) | bare-word
//
// Each listing declares its fields and, where they are closed sets, their
// values; anything else (an unknown field or value, OR, NOT, parentheses,
// other operators) is refused with INVALID_FILTER and a reason, so a typo
// never quietly matches nothing. The empty filter matches everything.
package listfilter

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/errs"
)

// Field declares one filterable field. Values, when set, is the closed
// set a value must be in.
type Field struct {
	Name   string
	Values []string
}

// Term is one comparison: Field = Value, or != when Not.
type Term struct {
	Field, Value string
	Not          bool
}

// Filter is the parsed conjunction; nil matches everything.
type Filter []Term

// Match reports whether every term holds; get returns an item's values
// of a field (none when it has none, several for a list such as a node's
// labels): "=" holds when one of them is the term's value, "!=" when none
// is.
func (f Filter) Match(get func(field string) []string) bool {
	for _, t := range f {
		if slices.Contains(get(t.Field), t.Value) == t.Not {
			return false
		}
	}
	return true
}

// Value returns the value an "=" term requires of field, if one does (a
// listing may use it to narrow its read).
func (f Filter) Value(field string) (string, bool) {
	for _, t := range f {
		if t.Field == field && !t.Not {
			return t.Value, true
		}
	}
	return "", false
}

// MaxLen bounds a filter's length.
const MaxLen = 1024

// Parse reads expr against the listing's fields.
func Parse(expr string, fields ...Field) (Filter, error) {
	if len(expr) > MaxLen {
		return nil, bad("longer than %d bytes", MaxLen)
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	var f Filter
	for len(toks) > 0 {
		if len(f) > 0 {
			if toks[0].text != "AND" || toks[0].quoted {
				return nil, bad("expected AND before %q; only AND of field = value terms is supported", toks[0].text)
			}
			toks = toks[1:]
		}
		if len(toks) < 3 {
			return nil, bad("a term is field = \"value\" (or !=); the filter ends early")
		}
		name, op, val := toks[0], toks[1], toks[2]
		toks = toks[3:]
		if name.quoted || (op.text != "=" && op.text != "!=") || op.quoted {
			return nil, bad("%q %q is not a term; a term is field = \"value\" (or !=)", name.text, op.text)
		}
		if !val.quoted && (val.text == "=" || val.text == "!=") {
			return nil, bad("%q is not a value; quote it", val.text)
		}
		if err := check(name.text, val.text, fields); err != nil {
			return nil, err
		}
		f = append(f, Term{Field: name.text, Value: val.text, Not: op.text == "!="})
	}
	return f, nil
}

func check(name, val string, fields []Field) error {
	var names []string
	for _, fd := range fields {
		if name == fd.Name {
			if fd.Values != nil && !slices.Contains(fd.Values, val) {
				return bad("%s %q is not one of %s", name, val, strings.Join(fd.Values, ", "))
			}
			return nil
		}
		names = append(names, fd.Name)
	}
	return bad("unknown field %q; this listing filters on %s", name, strings.Join(names, ", "))
}

type token struct {
	text   string
	quoted bool
}

// lex splits expr into words, operators and quoted strings.
func lex(expr string) ([]token, error) {
	var out []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '=':
			out, i = append(out, token{text: "="}), i+1
		case c == '!' && strings.HasPrefix(expr[i:], "!="):
			out, i = append(out, token{text: "!="}), i+2
		case c == '"':
			s, n, err := unquote(expr[i:])
			if err != nil {
				return nil, err
			}
			out, i = append(out, token{text: s, quoted: true}), i+n
		case bare(c):
			j := i
			for j < len(expr) && bare(expr[j]) {
				j++
			}
			out, i = append(out, token{text: expr[i:j]}), j
		default:
			r, _ := utf8.DecodeRuneInString(expr[i:]) // the character, not its first byte
			return nil, bad("unexpected %q at offset %d; only AND of field = \"value\" terms is supported", string(r), i)
		}
	}
	return out, nil
}

func bare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-./:@", c) >= 0
}

// unquote reads the quoted string s starts with; n is its length in expr.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 == len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", 0, bad("only \\\" and \\\\ escape in a quoted value")
			}
			i++
		}
		b.WriteByte(s[i])
	}
	return "", 0, bad("a quoted value is not closed")
}

// Quote writes v as a filter value.
func Quote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// Equal writes the filter field = value AND ... for the pairs given
// (name, value, name, value, ...), skipping empty values: what a CLI's
// flags become.
func Equal(pairs ...string) string {
	var terms []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			terms = append(terms, pairs[i]+" = "+Quote(pairs[i+1]))
		}
	}
	return strings.Join(terms, " AND ")
}

func bad(format string, args ...any) error {
	return errs.New(errs.KindInvalid, errs.ReasonBadFilter, "filter: "+format+" (docs/reference.md, Filters)", args...)
}
