package repair

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strings"
)

// ToolName renders a tool name from any agent as an OpenAI-style function
// name ([A-Za-z0-9_-], 1-64), which OpenAI, Anthropic and xAI all accept.
func ToolName(name string) string { return FunctionName(name, "_-") }

// FunctionName renders a tool name from any agent as a model API's
// function name: FunctionChars, and an empty name "unknown_tool".
func FunctionName(name, punct string) string {
	return cmp.Or(FunctionChars(name, punct), "unknown_tool")
}

// FunctionChars is name with what a model API allows in a function name:
// ASCII letters, digits and the runes of punct (what the API allows
// besides) kept, every other rune "_", cut at 64 bytes. An empty name
// stays empty, for the writer to name as its API wants.
func FunctionChars(name, punct string) string {
	s := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(punct, r) {
			return r
		}
		return '_'
	}, name)
	return s[:min(len(s), 64)]
}

// ArgsObject turns a neutral tool input (JSON text as the source agent sent
// it) into a compact JSON object, for agents whose tool calls must carry an
// object: empty input is {}, an object is kept (compacted), any other JSON
// value is wrapped as {"input": value} and text that is not JSON as
// {"input": "text"}.
func ArgsObject(input string) json.RawMessage {
	input = strings.TrimSpace(input)
	if input == "" {
		return json.RawMessage("{}")
	}
	var v any
	if json.Unmarshal([]byte(input), &v) != nil {
		b, _ := json.Marshal(map[string]string{"input": input})
		return b
	}
	if _, ok := v.(map[string]any); ok {
		var buf bytes.Buffer
		_ = json.Compact(&buf, []byte(input))
		return buf.Bytes()
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"input": json.RawMessage(input)})
	return b
}
