package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// sse writes server-sent events. The response carries Connection: close:
// clients that get an unframed keep-alive SSE body wait for more forever.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name may be empty (data-only streams).
func (s *sse) event(name string, v any) {
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

func (s *sse) raw(data string) {
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	s.flush()
}

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the error shape of api so the client's own error
// handling (retry on 429/5xx, messages) runs as it would against the real API.
func writeError(w http.ResponseWriter, api API, status int, msg string) {
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "0")
	}
	switch api {
	case Anthropic:
		typ := "api_error"
		switch {
		case status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case status == 529:
			typ = "overloaded_error"
		case status < 500:
			typ = "invalid_request_error"
		}
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	case Gemini:
		st := http.StatusText(status)
		if status == http.StatusBadRequest {
			st = "INVALID_ARGUMENT" // the google.rpc code the real API names a 400 by
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}})
	default:
		writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": status}})
	}
}

// tokens is a rough size estimate for usage fields (4 bytes a token).
func tokens(items []Item) int {
	n := 0
	for _, it := range items {
		n += len(it.Text) + len(it.ToolInput)
	}
	return n/4 + 1
}
