package fakemodel

import (
	"encoding/json"
	"net/http"
	"time"
)

// serveResponses answers POST /v1/responses with the minimal SSE sequence
// Codex accepts (or one JSON response when stream is false).
func serveResponses(w http.ResponseWriter, req Request, r Reply, id string) {
	model := req.Model
	var output []map[string]any
	if r.reasoning != nil {
		output = append(output, r.reasoning)
	}
	if r.Text != "" || r.Tool == nil {
		output = append(output, map[string]any{"id": "msg_fake_" + id, "type": "message", "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}}})
	}
	if r.Tool != nil {
		args, _ := json.Marshal(r.Tool.Input)
		call := map[string]any{"id": "fc_fake_" + id, "type": "function_call", "status": "completed",
			"name": r.Tool.Name, "call_id": r.Tool.ID, "arguments": string(args)}
		if r.Tool.Namespace != "" {
			call["namespace"] = r.Tool.Namespace
		}
		output = append(output, call)
	}
	in := r.inputTokens(req.Items)
	usage := map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 7, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + 7}
	resp := func(status string, out []map[string]any) map[string]any {
		m := map[string]any{"id": "resp_fake_" + id, "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": model, "output": out}
		if status == "completed" {
			m["usage"] = usage
		}
		return m
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp("completed", output))
		return
	}
	s := startSSE(w)
	seq := 0
	ev := func(name string, v map[string]any) {
		v["type"], v["sequence_number"] = name, seq
		seq++
		s.event(name, v)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []map[string]any{})})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []map[string]any{})})
	for i, item := range output {
		itemID := item["id"]
		switch item["type"] {
		case "reasoning":
			// Whole, as the item is done (Codex keeps the done item).
			ev("response.output_item.added", map[string]any{"output_index": i, "item": item})
		case "message":
			text := r.Text
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": itemID, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
			ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "delta": text})
			ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "text": text})
			ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		default:
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["status"], added["arguments"] = "in_progress", ""
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": item["arguments"]})
			ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i, "arguments": item["arguments"]})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": resp("completed", output)})
}

// serveChat answers POST /v1/chat/completions: chunks, a usage chunk when
// asked for, then [DONE]; or one chat.completion when stream is false (the
// npm grok CLI's headless mode).
func serveChat(w http.ResponseWriter, req Request, r Reply, id string, in map[string]any) {
	base := map[string]any{"id": "chatcmpl-fake" + id, "created": time.Now().Unix(), "model": req.Model}
	msg := map[string]any{"role": "assistant", "content": r.Text}
	finish := "stop"
	var calls []any
	if r.Tool != nil {
		args, _ := json.Marshal(r.Tool.Input)
		calls = append(calls, map[string]any{"index": 0, "id": r.Tool.ID, "type": "function",
			"function": map[string]any{"name": r.Tool.Name, "arguments": string(args)}})
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	pt := r.inputTokens(req.Items)
	usage := map[string]any{"prompt_tokens": pt, "completion_tokens": 7, "total_tokens": pt + 7}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, with(map[string]any{"object": "chat.completion", "usage": usage,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}}))
		return
	}
	s := startSSE(w)
	chunk := func(delta map[string]any, finish any) {
		s.event("", with(map[string]any{"object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}))
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if r.Text != "" {
		chunk(map[string]any{"content": r.Text}, nil)
	}
	if calls != nil {
		chunk(map[string]any{"tool_calls": calls}, nil)
	}
	chunk(map[string]any{}, finish)
	if so, _ := in["stream_options"].(map[string]any); so["include_usage"] == true {
		s.event("", with(map[string]any{"object": "chat.completion.chunk", "choices": []any{}, "usage": usage}))
	}
	s.raw("[DONE]")
}
