package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// serveGemini answers a conversation turn (streamGenerateContent).
func serveGemini(w http.ResponseWriter, req Request, r Reply) {
	var parts []any
	if r.Text != "" || r.Tool == nil {
		parts = append(parts, map[string]any{"text": r.Text})
	}
	if r.Tool != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": r.Tool.ID, "name": r.Tool.Name, "args": r.Tool.Input}})
	}
	resp := geminiResponse(req, r.inputTokens(req.Items), parts)
	if !req.Stream {
		// streamGenerateContent without alt=sse: a JSON array of chunks.
		writeJSON(w, http.StatusOK, []any{resp})
		return
	}
	startSSE(w).event("", resp)
}

func geminiResponse(req Request, pt int, parts []any) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": parts}}},
		"usageMetadata": map[string]any{"promptTokenCount": pt, "candidatesTokenCount": 7, "totalTokenCount": pt + 7},
		"modelVersion":  req.Model,
	}
}

// serveSide answers calls that are not conversation turns: token counts,
// JSON-mode helper calls (answered with an object built from the schema),
// gemini's plain generateContent helpers and title generators (a short
// text).
func serveSide(w http.ResponseWriter, rt routeInfo, req Request, in map[string]any) {
	items := req.Items
	switch {
	case rt.count && rt.api == Anthropic:
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": tokens(items)})
	case rt.count:
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": tokens(items)})
	case rt.api == Gemini:
		text := "FAKE-SIDE: " + clip(LastUserText(items), 80)
		if gc, _ := in["generationConfig"].(map[string]any); gc != nil {
			schema := gc["responseJsonSchema"]
			if schema == nil {
				schema = gc["responseSchema"]
			}
			if schema != nil {
				b, _ := json.Marshal(fromSchema(schema))
				text = string(b)
			}
		}
		writeJSON(w, http.StatusOK, geminiResponse(req, tokens(items), []any{map[string]any{"text": text}}))
	case rt.api == Anthropic:
		serveAnthropic(w, req, Reply{Text: "Fake title"}, "side")
	case rt.api == Responses:
		serveResponses(w, req, Reply{Text: "Fake title"}, "side")
	default: // a helper call such as opencode's title generator
		serveChat(w, req, Reply{Text: "Fake title"}, "side", in)
	}
}

// fromSchema builds a value that satisfies a (Gemini or JSON) schema. Numbers
// use the schema's minimum or 1: gemini's router rejects complexity_score < 1.
func fromSchema(schema any) any {
	sm, _ := schema.(map[string]any)
	if enum := list(sm["enum"]); len(enum) > 0 {
		return enum[0]
	}
	typ := strings.ToLower(str(sm["type"]))
	if typ == "" {
		if types := list(sm["type"]); len(types) > 0 {
			typ = strings.ToLower(str(types[0]))
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := sm["properties"].(map[string]any)
		for k, v := range props {
			out[k] = fromSchema(v)
		}
		return out
	case "array":
		return []any{}
	case "integer", "number":
		if m, ok := sm["minimum"].(json.Number); ok {
			return m
		}
		return 1
	case "boolean":
		return false
	}
	return "fake"
}
