package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// serveAnthropic answers POST /v1/messages, streamed (the event sequence
// Claude Code parses) or as one JSON message.
func serveAnthropic(w http.ResponseWriter, req Request, r Reply, id string) {
	w.Header().Set("request-id", "req_fake_"+id)
	model := req.Model
	if model == "" {
		model = "claude-fake"
	}
	var blocks []map[string]any
	if r.Text != "" || r.Tool == nil {
		blocks = append(blocks, map[string]any{"type": "text", "text": r.Text})
	}
	stop := "end_turn"
	if r.Tool != nil {
		for k := range max(r.Parallel, 1) {
			id := r.Tool.ID
			if k > 0 {
				id = fmt.Sprintf("%s_%d", id, k)
			}
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": r.Tool.Name, "input": r.Tool.Input})
		}
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": r.inputTokens(req.Items), "output_tokens": 7,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	msg := map[string]any{"id": "msg_fake_" + id, "type": "message", "role": "assistant", "model": model,
		"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		writeJSON(w, http.StatusOK, msg)
		return
	}
	s := startSSE(w)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	s.event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range blocks {
		if b["type"] == "text" {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			if i == 0 {
				s.event("ping", map[string]any{"type": "ping"})
			}
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		} else {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			args, _ := json.Marshal(b["input"])
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
