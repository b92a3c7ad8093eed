package gemini

import "github.com/cast-dev/cast/internal/agents/repair"

// geminiPunct is what a Gemini function name may hold besides letters and
// digits.
const geminiPunct = "_.:-"

// toolName renders a tool name from any agent as a valid Gemini function
// name (letters, digits, _ . : -, at most 64, not starting with a digit or
// punctuation), so the API never rejects a foreign call in the history.
func toolName(name string) string {
	s := repair.FunctionName(name, geminiPunct)
	if c := s[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		s = repair.FunctionName("_"+s, geminiPunct)
	}
	return s
}
