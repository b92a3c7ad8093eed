package repair

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ToolName renders a tool name from any agent as an OpenAI-style function
// name ([A-Za-z0-9_-], 1-64), which OpenAI, Anthropic and xAI all accept:
// every other rune becomes "_", an empty name is "unknown_tool", and a longer
// one is cut at 64 bytes.
func ToolName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		return "unknown_tool"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
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
