// Package brief asks a small model for a handoff brief: an Anthropic
// Messages or OpenAI-compatible Chat Completions endpoint, non-streaming.
// It knows nothing of sessions; moves.Handoff composes its input.
package brief

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Config selects the model. Endpoint "" disables model briefs (the
// fallback brief is used).
type Config struct {
	Provider string // "anthropic" (default) or "openai"
	Endpoint string // base URL, e.g. https://api.anthropic.com
	Model    string
	APIKey   string // never logged
	Timeout  time.Duration
}

// Validate checks c.
func (c Config) Validate() error {
	switch c.Provider {
	case "", "anthropic", "openai":
	default:
		return fmt.Errorf("brief provider %q: use anthropic or openai", c.Provider)
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		return fmt.Errorf("brief endpoint %q must be an http(s) URL", c.Endpoint)
	}
	return nil
}

// Instructions is what the model is asked to write.
const Instructions = `Write a handoff brief (under 500 words) for another coding agent taking over this conversation. Use these sections: Goal, Decisions, Verified, Open questions, Next steps. Name exact files, commands and ids. Only facts from the conversation below.`

// Client calls the model.
type Client struct {
	cfg  Config
	http *http.Client
}

// New returns a client; nil when no endpoint is configured.
func New(cfg Config) *Client {
	if cfg.Endpoint == "" {
		return nil
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	return &Client{cfg: cfg, http: &http.Client{Timeout: cfg.Timeout}}
}

// Brief asks for a brief of conversation (already rendered as text).
func (c *Client) Brief(ctx context.Context, conversation string) (string, error) {
	if c == nil {
		return "", fmt.Errorf("no brief model configured")
	}
	prompt := Instructions + "\n\n<conversation>\n" + conversation + "\n</conversation>"
	base := strings.TrimRight(c.cfg.Endpoint, "/")
	var url string
	var body any
	hdr := http.Header{"Content-Type": {"application/json"}}
	if c.cfg.Provider == "openai" {
		url = base + "/v1/chat/completions"
		body = map[string]any{"model": c.cfg.Model, "stream": false, "messages": []any{map[string]any{"role": "user", "content": prompt}}}
		hdr.Set("Authorization", "Bearer "+c.cfg.APIKey)
	} else {
		url = base + "/v1/messages"
		body = map[string]any{"model": c.cfg.Model, "max_tokens": 1200, "stream": false, "messages": []any{map[string]any{"role": "user", "content": prompt}}}
		hdr.Set("x-api-key", c.cfg.APIKey)
		hdr.Set("anthropic-version", "2023-06-01")
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header = hdr
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("brief model unreachable: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("brief model answered %d", resp.StatusCode)
	}
	text := extract(c.cfg.Provider, raw)
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("brief model answered no text")
	}
	return strings.TrimSpace(text), nil
}

func extract(provider string, raw []byte) string {
	if provider == "openai" {
		var r struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(raw, &r) == nil && len(r.Choices) > 0 {
			return r.Choices[0].Message.Content
		}
		return ""
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}
