package fakemodel

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
)

// normalize turns a request body into the conversation items the model saw.
func normalize(api API, in map[string]any) []Item {
	switch api {
	case Anthropic:
		return anthropicItems(in)
	case Responses:
		return responsesItems(in)
	case Chat:
		return chatItems(in)
	case Gemini:
		return geminiItems(in)
	}
	return nil
}

func anthropicItems(in map[string]any) []Item {
	var out []Item
	out = append(out, textItems("system", in["system"])...)
	for _, m := range list(in["messages"]) {
		mm, _ := m.(map[string]any)
		role := str(mm["role"])
		content := mm["content"]
		if s, ok := content.(string); ok {
			out = append(out, Item{Role: role, Kind: KindText, Text: s})
			continue
		}
		for _, b := range list(content) {
			bm, _ := b.(map[string]any)
			switch str(bm["type"]) {
			case "text":
				out = append(out, Item{Role: role, Kind: KindText, Text: str(bm["text"])})
			case "thinking":
				out = append(out, Item{Role: role, Kind: KindThinking, Text: str(bm["thinking"])})
			case "redacted_thinking":
				out = append(out, Item{Role: role, Kind: KindThinking})
			case "tool_use", "server_tool_use":
				out = append(out, Item{Role: role, Kind: KindToolCall, ToolName: str(bm["name"]),
					ToolCallID: str(bm["id"]), ToolInput: jsonText(bm["input"])})
			case "tool_result":
				isErr, _ := bm["is_error"].(bool)
				out = append(out, Item{Role: role, Kind: KindToolResult, ToolCallID: str(bm["tool_use_id"]),
					Text: flatText(bm["content"]), IsError: isErr})
				out = append(out, imageItems("tool", bm["content"])...)
			case "image":
				out = append(out, imageItems(role, []any{bm})...)
			}
		}
	}
	return out
}

func responsesItems(in map[string]any) []Item {
	var out []Item
	if s := str(in["instructions"]); s != "" {
		out = append(out, Item{Role: "system", Kind: KindText, Text: s})
	}
	input := in["input"]
	if s, ok := input.(string); ok {
		return append(out, Item{Role: "user", Kind: KindText, Text: s})
	}
	for _, x := range list(input) {
		xm, _ := x.(map[string]any)
		typ := str(xm["type"])
		if typ == "" && xm["role"] != nil {
			typ = "message"
		}
		switch typ {
		case "message":
			role := str(xm["role"])
			if role == "developer" {
				role = "system"
			}
			out = append(out, textItems(role, xm["content"])...)
		case "reasoning":
			var parts []string
			for _, p := range list(xm["summary"]) {
				pm, _ := p.(map[string]any)
				parts = append(parts, str(pm["text"]))
			}
			for _, p := range list(xm["content"]) {
				pm, _ := p.(map[string]any)
				parts = append(parts, str(pm["text"]))
			}
			out = append(out, Item{Role: "assistant", Kind: KindThinking, Text: strings.Join(parts, "\n")})
		case "function_call":
			out = append(out, Item{Role: "assistant", Kind: KindToolCall, ToolName: str(xm["name"]),
				ToolCallID: str(xm["call_id"]), ToolInput: str(xm["arguments"])})
		case "custom_tool_call":
			out = append(out, Item{Role: "assistant", Kind: KindToolCall, ToolName: str(xm["name"]),
				ToolCallID: str(xm["call_id"]), ToolInput: str(xm["input"])})
		case "local_shell_call":
			out = append(out, Item{Role: "assistant", Kind: KindToolCall, ToolName: "local_shell",
				ToolCallID: str(xm["call_id"]), ToolInput: jsonText(xm["action"])})
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			out = append(out, Item{Role: "tool", Kind: KindToolResult, ToolCallID: str(xm["call_id"]),
				Text: flatText(xm["output"])})
			out = append(out, imageItems("tool", xm["output"])...)
		}
	}
	return out
}

func chatItems(in map[string]any) []Item {
	var out []Item
	for _, m := range list(in["messages"]) {
		mm, _ := m.(map[string]any)
		role := str(mm["role"])
		if role == "developer" {
			role = "system"
		}
		if role == "tool" {
			out = append(out, Item{Role: "tool", Kind: KindToolResult, ToolCallID: str(mm["tool_call_id"]),
				ToolName: str(mm["name"]), Text: flatText(mm["content"])})
			out = append(out, imageItems("tool", mm["content"])...)
			continue
		}
		for _, k := range []string{"reasoning_content", "reasoning"} {
			if s := str(mm[k]); s != "" {
				out = append(out, Item{Role: role, Kind: KindThinking, Text: s})
			}
		}
		out = append(out, textItems(role, mm["content"])...)
		for _, tc := range list(mm["tool_calls"]) {
			tm, _ := tc.(map[string]any)
			fn, _ := tm["function"].(map[string]any)
			out = append(out, Item{Role: role, Kind: KindToolCall, ToolName: str(fn["name"]),
				ToolCallID: str(tm["id"]), ToolInput: str(fn["arguments"])})
		}
	}
	return out
}

func geminiItems(in map[string]any) []Item {
	var out []Item
	if si, ok := in["systemInstruction"].(map[string]any); ok {
		out = append(out, geminiParts("system", si["parts"])...)
	}
	for _, c := range list(in["contents"]) {
		cm, _ := c.(map[string]any)
		role := str(cm["role"])
		if role == "model" {
			role = "assistant"
		}
		out = append(out, geminiParts(role, cm["parts"])...)
	}
	return out
}

func geminiParts(role string, parts any) []Item {
	var out []Item
	for _, p := range list(parts) {
		pm, _ := p.(map[string]any)
		switch {
		case pm["functionCall"] != nil:
			fc, _ := pm["functionCall"].(map[string]any)
			out = append(out, Item{Role: role, Kind: KindToolCall, ToolName: str(fc["name"]),
				ToolCallID: str(fc["id"]), ToolInput: jsonText(fc["args"])})
		case pm["functionResponse"] != nil:
			fr, _ := pm["functionResponse"].(map[string]any)
			out = append(out, Item{Role: "tool", Kind: KindToolResult, ToolName: str(fr["name"]),
				ToolCallID: str(fr["id"]), Text: jsonText(fr["response"])})
			out = append(out, geminiParts("tool", fr["parts"])...) // images a tool returned
		case pm["thought"] == true:
			out = append(out, Item{Role: role, Kind: KindThinking, Text: str(pm["text"])})
		case pm["text"] != nil:
			out = append(out, Item{Role: role, Kind: KindText, Text: str(pm["text"])})
		case pm["inlineData"] != nil:
			id, _ := pm["inlineData"].(map[string]any)
			out = append(out, imageItem(role, str(id["mimeType"]), str(id["data"])))
		}
	}
	return out
}

// textItems reads content that is a string or a list of text-ish parts
// (Anthropic system blocks, Responses input_text/output_text, Chat parts).
func textItems(role string, content any) []Item {
	if s, ok := content.(string); ok {
		if s == "" {
			return nil
		}
		return []Item{{Role: role, Kind: KindText, Text: s}}
	}
	var out []Item
	for _, p := range list(content) {
		pm, _ := p.(map[string]any)
		switch str(pm["type"]) {
		case "text", "input_text", "output_text":
			out = append(out, Item{Role: role, Kind: KindText, Text: str(pm["text"])})
		case "refusal":
			out = append(out, Item{Role: role, Kind: KindText, Text: str(pm["refusal"])})
		}
	}
	return append(out, imageItems(role, content)...)
}

// imageItems reads the images among content's parts, in any of the APIs'
// shapes: Anthropic {type:image, source:{media_type, data}}, Responses
// {type:input_image, image_url:"data:…"}, Chat {type:image_url,
// image_url:{url:"data:…"}}.
func imageItems(role string, content any) []Item {
	var out []Item
	for _, p := range list(content) {
		pm, _ := p.(map[string]any)
		switch str(pm["type"]) {
		case "image":
			src, _ := pm["source"].(map[string]any)
			out = append(out, imageItem(role, str(src["media_type"]), str(src["data"])))
		case "input_image":
			out = append(out, dataURLItem(role, str(pm["image_url"])))
		case "image_url":
			u, _ := pm["image_url"].(map[string]any)
			out = append(out, dataURLItem(role, str(u["url"])))
		}
	}
	return out
}

func dataURLItem(role, url string) Item {
	mt, data, _ := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
	return imageItem(role, mt, data)
}

// imageItem names an image by media type and the sha256 of its decoded
// bytes; data that is not base64 is named as such.
func imageItem(role, mediaType, b64 string) Item {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Item{Role: role, Kind: KindImage, Text: mediaType + " undecodable"}
	}
	return Item{Role: role, Kind: KindImage, Text: ImageText(mediaType, raw)}
}

// ImageText is how an image shows in Item.Text.
func ImageText(mediaType string, data []byte) string {
	return mediaType + " sha256:" + transcript.Image{MediaType: mediaType, Data: data}.Digest()
}

// flatText renders tool output that is a string or a list of text parts.
func flatText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var parts []string
	for _, p := range list(v) {
		pm, _ := p.(map[string]any)
		if t, ok := pm["text"].(string); ok {
			parts = append(parts, t)
		}
	}
	if parts == nil && v != nil {
		return jsonText(v)
	}
	return strings.Join(parts, "\n")
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// jsonText renders v as compact JSON without HTML escaping, so tests can
// match "&&" or "<" in tool input as the client sent it.
func jsonText(v any) string {
	if v == nil {
		return ""
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
