package fakemodel

// Real APIs refuse a conversation carrying an empty text block, wherever a
// writer left one (say next to the image of an image-only user message).
// Strict mode refuses it the same way, with each API's own message:
//
//   - Anthropic: 400 invalid_request_error "messages: text content blocks
//     must be non-empty" for a {"type":"text","text":""} block of any
//     message (anthropics/claude-code#59812, #49171).
//   - Gemini: 400 INVALID_ARGUMENT "Unable to submit request because it has
//     an empty text parameter…" for a {"text":""} part of contents
//     (google-gemini/deprecated-generative-ai-js#361, FoundationAgents/
//     OpenManus#876).
//   - OpenAI (Responses, Chat Completions): no such rule is documented or
//     reported (a text part's text is any string), so neither is checked.

const (
	anthropicEmptyText = "messages: text content blocks must be non-empty"
	geminiEmptyText    = "Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/gemini"
)

// emptyText returns the message the real api answers a request body in
// with (400), or "" when it has no empty text block.
func emptyText(api API, in map[string]any) string {
	switch api {
	case Anthropic:
		for _, m := range list(in["messages"]) {
			mm, _ := m.(map[string]any)
			for _, b := range list(mm["content"]) {
				bm, _ := b.(map[string]any)
				if str(bm["type"]) == "text" && str(bm["text"]) == "" {
					return anthropicEmptyText
				}
			}
		}
	case Gemini:
		for _, c := range list(in["contents"]) {
			cm, _ := c.(map[string]any)
			for _, p := range list(cm["parts"]) {
				pm, _ := p.(map[string]any)
				// Left alone: a part carrying a thought signature, whose
				// text a model turn may leave empty; whether the API
				// refuses such a part sent back is not established.
				if t, ok := pm["text"].(string); ok && t == "" && pm["thoughtSignature"] == nil {
					return geminiEmptyText
				}
			}
		}
	}
	return ""
}
