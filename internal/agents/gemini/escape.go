package gemini

import (
	"strings"
	"unicode"
)

// jsTrim approximates JavaScript's String.prototype.trim, which the CLI
// uses: Go's space set plus the byte order mark.
func jsTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
}

// EscapePrefix is put in front of user text that Gemini CLI would drop on
// resume. A backslash is visible, short, and reads as "literal" to a model.
const EscapePrefix = `\`

// droppedPrefixes are the starts of trimmed user text that Gemini CLI 0.61
// treats as commands or as its own regenerated context, and skips when it
// loads a session.
var droppedPrefixes = []string{"/", "?", "<session_context>", "<hook_context>"}

// cliIgnores is the CLI's isIgnoredUserContent: the user texts it skips
// when it loads a session.
func cliIgnores(text string) bool {
	t := jsTrim(text)
	if t == "" {
		return true
	}
	for _, p := range droppedPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// dropped reports whether text needs escaping: the CLI would skip it, or it
// already starts with EscapePrefix before such text (so that Escape and
// Unescape are exact inverses).
func dropped(text string) bool {
	if cliIgnores(text) {
		return true
	}
	t := jsTrim(text)
	if rest, ok := strings.CutPrefix(t, EscapePrefix); ok {
		return dropped(rest)
	}
	return false
}

// Escape makes user text survive Gemini CLI's resume filter.
func Escape(text string) string {
	if dropped(text) {
		return EscapePrefix + text
	}
	return text
}

// Unescape undoes Escape; text Escape would not have produced is returned
// unchanged.
func Unescape(text string) string {
	if rest, ok := strings.CutPrefix(text, EscapePrefix); ok && dropped(rest) {
		return rest
	}
	return text
}

// interruptedPlaceholder is the model turn Gemini puts after a history
// that ends with a tool result (a turn interrupted once its tool ran),
// before the next prompt, and writes out when it next rewrites the
// session. It makes it again whenever a history ends so, so it is not
// conversation; read as an answer it came before the prompt's record, and
// the turn took its prompt for a message of the user's.
const interruptedPlaceholder = "[The previous response was interrupted before it completed.]"

// regenerated reports whether a user record is context the CLI writes and
// rebuilds itself on every run, so it is not conversation.
func regenerated(text string) bool {
	t := jsTrim(text)
	return strings.HasPrefix(t, "<session_context>") || strings.HasPrefix(t, "<hook_context>")
}
