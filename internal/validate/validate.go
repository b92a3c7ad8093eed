// Package validate holds the rules for every field a client sets on cast's
// API, in one table (rules below), so the control plane's handlers and the
// CLI refuse the same values with the same words before anything is
// stored, put on an agent's command line or handed to git. A refusal is an
// *errs.Error of KindInvalid, reason INVALID_ARGUMENT, with the field's
// name in its metadata ("field") and a message saying what is wrong and
// what to do. The package knows nothing of gRPC: callers pass plain values.
package validate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/ids"
)

// Kind names a class of value; each has one rule in the table.
type Kind int

// The kinds of client-supplied strings.
const (
	// Model is a model or effort name. It reaches an agent's argv as the
	// value of a flag, so it may never start with '-' (it would be read as
	// a flag: "--dangerously-skip-permissions").
	Model         Kind = iota + 1
	Name               // node, label, account, agent, usage window
	UserName           // a person's name from an OIDC token: a name or an email address
	SessionID          // as `cast ls` prints them
	ClientID           // request_id, client_id, migration and permission ids
	Branch             // a git branch cast makes a worktree for
	Title              // one line shown by `cast ls`
	Cwd                // where the agent runs
	Prompt             // text an agent is given: a user message, a direction
	Text               // a transcript row's text (agent output, tool output)
	Reason             // a short report: state_reason, an error
	ToolName           // a tool's name in a permission request
	Ident              // a one-line id or label a node reports: native ids, a row's model
	PermissionArg      // a tool call's input shown for approval
	PageToken          // a next_page_token handed back
	RepoPath           // a repository under a checkout, relative to it
	LabelKey           // an admin label's key: [prefix/]name, as cast.dev/custodian
	// NativeID is an agent's own session id a node reports: one element
	// of a file name, since `cast restore` writes the session back under
	// it and the agent's CLI takes it as an argument.
	NativeID
	// RequestID is the request_id of a call that stores a user message
	// under it (send, create, the moves): a ClientID that is not in the
	// form of the ids nodes give rows they synced or adopted, which are
	// history no node runs (ids.History).
	RequestID
)

// rule is one row of the table: a byte cap, what the value may contain,
// and the advice a refusal gives.
type rule struct {
	max   int                   // bytes; 0: no cap here (the store caps message bodies)
	check func(v string) string // "" when v is fine, else what is wrong
	hint  string                // what to do instead
	// reason overrides INVALID_ARGUMENT where the API already has a
	// more specific one.
	reason string
}

// Caps, shared with the CLI's early checks.
const (
	MaxTitle  = 256
	MaxCwd    = 4096
	MaxReason = 4096
	// MaxPrompt caps a direction (text that is not a message: the store's
	// own limit covers messages).
	MaxPrompt = 1 << 20
	// MaxHelloSessions bounds the sessions one node hello may list (each
	// one the node no longer owns costs the control plane a lookup and a
	// release); a node owning more lists that many.
	MaxHelloSessions = 100000
)

// TitleFrom is the title a session gets from a message's text when none
// is given (a new session's first prompt, an imported session's first
// user text): its words on one line, cut at 60 runes with "…".
func TitleFrom(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return text
}

var rules = map[Kind]rule{
	Model: {max: 128, check: matches(ids.ValidModel),
		hint: "use letters, digits and . _ : / @ + -, starting with a letter or digit (e.g. claude-sonnet-4-5, openai/gpt-5, high)"},
	Name: {max: 63, check: matches(ids.ValidName),
		hint: "use letters, digits, '.', '_' or '-', starting with a letter or digit"},
	UserName: {max: 254, check: matches(ids.ValidUserName),
		hint: "use letters, digits, '.', '_', '-', '@' or '+', starting with a letter or digit (a name or an email address)"},
	SessionID: {max: 32, check: matches(ids.ValidSessionID),
		hint: "session ids are 7 to 32 lowercase letters and digits, as `cast ls` shows them"},
	ClientID: {max: 128, check: matches(ids.ValidClientID),
		hint: "use letters, digits, '.', '_', ':' or '-' (a ULID or UUID), starting with a letter or digit"},
	RequestID: {max: 128, check: all(matches(ids.ValidClientID), notHistory),
		hint: "use a ULID or UUID (letters, digits, '.', '_', ':' or '-', starting with a letter or digit)"},
	Branch: {max: 200, check: matches(ids.ValidBranch),
		hint: "use a valid git branch name (git check-ref-format --branch) that does not start with '-'"},
	Title: {max: MaxTitle, check: all(utf8Valid, noControl), hint: "give one line of text"},
	Cwd:   {max: MaxCwd, check: all(utf8Valid, noControl, absolute), hint: "give an absolute directory path on one line"},
	Prompt: {check: all(utf8Valid, noNUL),
		hint: "remove the NUL bytes: agents cannot take them (send binary data as a file)"},
	Text:          {check: utf8Valid, hint: "send UTF-8 text"},
	Reason:        {max: MaxReason, check: all(utf8Valid, noNUL), hint: "send a shorter UTF-8 report"},
	ToolName:      {max: 256, check: all(utf8Valid, noControl), hint: "give the tool's name on one line"},
	Ident:         {max: 512, check: all(utf8Valid, noControl), hint: "send it on one line"},
	PermissionArg: {max: 1 << 20, check: all(utf8Valid, noNUL), hint: "send the tool input as UTF-8 text under 1 MiB"},
	RepoPath: {max: MaxCwd, check: all(utf8Valid, noControl, relativeInside),
		hint: "give a folder under the checkout, relative to it, with no '..' and not starting with '-'"},
	LabelKey: {max: 127, check: matches(validLabelKey),
		hint: "give [prefix/]name: a DNS-style prefix (lowercase letters, digits, '.', '-') and a name of letters, digits, '.', '_' or '-', as cast.dev/custodian"},
	NativeID: {max: 512, check: all(utf8Valid, noControl, fileElement),
		hint: "send the agent's session id as it names its file: no '/', '\\' or '..', not starting with '-'"},
	PageToken: {max: 1024, check: matches(base64URL), reason: errs.ReasonBadPageToken,
		hint: "pass the next_page_token of the previous page unchanged, or start again without one"},
}

// Check checks v, a value of kind k in the field named field; an empty v
// passes (use Need where the field is required).
func Check(k Kind, field, v string) error {
	if v == "" {
		return nil
	}
	r, ok := rules[k]
	if !ok {
		panic(fmt.Sprintf("validate: no rule for kind %d", k)) // a programming error
	}
	var err *errs.Error
	if r.max > 0 && len(v) > r.max {
		err = refuse(field, "%s is %d bytes, over the limit of %d; %s", field, len(v), r.max, r.hint)
	} else if what := r.check(v); what != "" {
		err = refuse(field, "%s %s %s; %s", field, Show(v), what, r.hint)
	}
	if err == nil {
		return nil
	}
	if r.reason != "" {
		err.Reason = r.reason
	}
	return err
}

// Need is Check for a required field.
func Need(k Kind, field, v string) error {
	if v == "" {
		return refuse(field, "%s is required", field)
	}
	return Check(k, field, v)
}

// Each checks every value in vs as Check does, naming the offender's index.
func Each(k Kind, field string, vs []string, max int) error {
	if len(vs) > max {
		return refuse(field, "%d values in %s; at most %d", len(vs), field, max)
	}
	for i, v := range vs {
		if err := Need(k, fmt.Sprintf("%s[%d]", field, i), v); err != nil {
			return err
		}
	}
	return nil
}

// Seq checks that seq is 0 (unset) or a seq the session already has: a
// cursor past the session's last message would skip everything after it.
func Seq(field string, seq, last int64) error {
	if seq < 0 || seq > last {
		return refuse(field, "%s %d is outside the session (its messages are 1 to %d); report a seq the session has", field, seq, last)
	}
	return nil
}

// Range checks lo <= v <= hi.
func Range(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return refuse(field, "%s %d is out of range; use %d to %d", field, v, lo, hi)
	}
	return nil
}

// Percent checks a finite percentage in [0, max].
func Percent(field string, v, max float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > max {
		return refuse(field, "%s %v is not a percentage; send a finite number from 0 to %v", field, v, max)
	}
	return nil
}

// Enum checks that v is one of names' values, and not 0 (UNSPECIFIED)
// unless zeroOK.
func Enum(field string, v int32, names map[int32]string, zeroOK bool) error {
	if _, ok := names[v]; !ok || (v == 0 && !zeroOK) {
		var valid []string
		for n, s := range names {
			if n != 0 || zeroOK {
				valid = append(valid, s)
			}
		}
		slices.Sort(valid)
		return refuse(field, "%s %d is not valid; use one of %s", field, v, strings.Join(valid, ", "))
	}
	return nil
}

// ClockSkew is how far ahead of the server's clock a client's timestamp
// may be.
const ClockSkew = 5 * time.Minute

// Past checks a client-supplied time (an imported row's create_time): it
// must be a real time after 1970 and not in the future beyond ClockSkew.
// Times of rows a user sends are set by the server, never taken from them.
func Past(field string, t time.Time, now time.Time) error {
	if t.Before(time.Unix(0, 0)) || t.After(now.Add(ClockSkew)) {
		return refuse(field, "%s %s is not between 1970 and now; leave it unset and the server stamps it", field, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// Clip makes text from outside cast (a CLI's stderr or output) a Reason
// the API takes: valid UTF-8 without NUL, at most n bytes, cut between
// characters, "…" marking a cut. A report refused for its text is sent
// again and again, so a node clips before it reports.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return s
	}
	return cutAt(s, n) + "…"
}

// cutAt is s cut to at most n bytes (n < len(s)), between characters.
func cutAt(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Show quotes v for an error message: short, on one line, controls escaped.
func Show(v string) string {
	if len(v) > 60 {
		return strconv.Quote(cutAt(v, 60)) + "…"
	}
	return strconv.Quote(v)
}

func refuse(field, format string, args ...any) *errs.Error {
	return errs.Invalid(format, args...).With("field", field)
}

func matches(ok func(string) bool) func(string) string {
	return func(v string) string {
		if !ok(v) {
			if v[0] == '-' {
				return "starts with '-' and would be read as a flag"
			}
			return "is malformed"
		}
		return ""
	}
}

func all(checks ...func(string) string) func(string) string {
	return func(v string) string {
		for _, c := range checks {
			if what := c(v); what != "" {
				return what
			}
		}
		return ""
	}
}

// validLabelKey: an optional prefix of lowercase DNS labels and '/', then
// a name (the key form of Kubernetes labels).
func validLabelKey(v string) bool {
	prefix, name, found := strings.Cut(v, "/")
	if !found {
		prefix, name = "", v
	}
	if found && (prefix == "" || strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" ||
		strings.ContainsAny(prefix[:1]+prefix[len(prefix)-1:], ".-")) {
		return false
	}
	return ids.ValidName(name)
}

func base64URL(v string) bool {
	return strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

func utf8Valid(v string) string {
	if !utf8.ValidString(v) {
		return "is not valid UTF-8"
	}
	return ""
}

// notHistory refuses the forms of the client ids nodes give the rows they
// synced ("n.") or adopted ("adopt."): a user message under one would be
// taken for history and never run.
func notHistory(v string) string {
	if ids.History(v) {
		return "is in the form of cast's own ids for rows a node synced or adopted (\"" + ids.SyncedPrefix + "\", \"" + ids.AdoptedPrefix + "\")"
	}
	return ""
}

func noNUL(v string) string {
	if strings.IndexByte(v, 0) >= 0 {
		return "contains a NUL byte"
	}
	return ""
}

// noControl refuses C0/C1 controls and DEL: a newline in a cwd or a title
// breaks every line-oriented reader downstream (and `cast ls`).
func noControl(v string) string {
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return fmt.Sprintf("contains a control character (%U at byte %d)", []rune(v[i:])[0], i)
	}
	return ""
}

func absolute(v string) string {
	if !strings.HasPrefix(v, "/") {
		return "is not an absolute path"
	}
	return ""
}

// fileElement accepts one element of a file name: joined to a folder it
// stays in it.
func fileElement(v string) string {
	switch {
	case v == "." || v == "..":
		return "is not a name"
	case strings.ContainsAny(v, `/\`):
		return "contains a path separator"
	case strings.HasPrefix(v, "-"):
		return "starts with '-' and would be read as a flag"
	}
	return ""
}

// relativeInside accepts a relative path that stays where it starts: no
// '..' element, no leading '-' (git would read it as an option), not
// absolute. Symlinks are the node's to resolve, against the real checkout.
func relativeInside(v string) string {
	switch {
	case strings.HasPrefix(v, "/"):
		return "is an absolute path; give it relative to the checkout"
	case strings.HasPrefix(v, "-"):
		return "starts with '-'"
	}
	for _, el := range strings.Split(v, "/") {
		if el == ".." {
			return "leaves the checkout ('..')"
		}
		if strings.HasPrefix(el, "-") {
			return "has an element starting with '-'"
		}
	}
	return ""
}
