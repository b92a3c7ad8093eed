// Package ids makes and checks the identifiers cast hands out and accepts.
// Every client-supplied id passes through a Valid* check before it reaches
// the store, a path or a process argument.
package ids

import (
	"crypto/rand"
	"regexp"
	"strings"
	"unicode"

	"github.com/oklog/ulid/v2"
)

// sessionAlphabet avoids nothing clever: lowercase letters and digits read
// well in `cast read jx731jg 87:106` and are safe in paths and keys.
const sessionAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// SessionIDLen is the length of generated session ids.
const SessionIDLen = 7

var (
	sessionRE = regexp.MustCompile(`^[0-9a-z]{7,32}$`)
	// Names of nodes, agents, labels: DNS-label-like, no leading dash.
	nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)
	// People's names as an OIDC issuer gives them (email,
	// preferred_username): a name, or an email address.
	userRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._@+-]{0,253}$`)
	// Models and efforts: "claude-sonnet-4-5", "openai/gpt-5", "high".
	modelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)
	// Client/request ids: ULIDs, UUIDs or similar opaque tokens.
	clientRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
)

// NewSessionID returns a random 7-character session id (36^7 ≈ 7.8e10; the
// store's create txn rejects the rare collision and the caller retries).
func NewSessionID() string {
	b := make([]byte, SessionIDLen)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux; a failure is fatal
	}
	for i := range b {
		b[i] = sessionAlphabet[int(b[i])%len(sessionAlphabet)]
	}
	return string(b)
}

// NewClientID returns a new ULID, sortable by time.
func NewClientID() string { return ulid.Make().String() }

// ValidSessionID reports whether s is a well-formed session id.
func ValidSessionID(s string) bool { return sessionRE.MatchString(s) }

// ValidName reports whether s is a well-formed node, agent or label name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// ValidUserName reports whether s is a well-formed person's name from an
// OIDC token: a name, or an email address. It is compared, never put on a
// command line or in a path.
func ValidUserName(s string) bool { return userRE.MatchString(s) }

// ValidClientID reports whether s is a well-formed client or request id.
func ValidClientID(s string) bool { return clientRE.MatchString(s) }

// ValidModel reports whether s is a well-formed model, agent or effort name
// (it reaches agent command lines as one argument, never a shell).
func ValidModel(s string) bool { return modelRE.MatchString(s) }

// ValidBranch reports whether s may name a git branch cast creates a
// worktree for: git's check-ref-format rules for a branch, checked before
// git ever sees the name (the node runs `git check-ref-format --branch`
// too), and never starting with '-' so it cannot read as an option.
func ValidBranch(s string) bool {
	if len(s) == 0 || len(s) > 200 || s[0] == '-' || s[0] == '/' || s[len(s)-1] == '/' || s[len(s)-1] == '.' ||
		strings.HasSuffix(s, ".lock") || strings.Contains(s, "..") || strings.Contains(s, "//") ||
		strings.Contains(s, "@{") || s == "@" || strings.Contains(s, "/.") || s[0] == '.' ||
		strings.Contains(s, ".lock/") || s == "HEAD" { // no component ends in .lock; HEAD is no branch
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// DefaultBranch is a thread's worktree branch when none is given:
// cast/<title-slug>--<last 6 of the session id>.
func DefaultBranch(title, sessionID string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			if b.Len() >= 40 {
				break
			}
			continue
		}
		dash = true
	}
	slug := b.String()
	if slug == "" {
		slug = "thread"
	}
	return "cast/" + slug + "--" + sessionID[max(0, len(sessionID)-6):]
}
