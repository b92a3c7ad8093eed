package codex

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// largePromptTag opens the short turn that follows a prompt delivered as
// history. The Reader drops it like Codex's own harness text, so the
// session reads back with the user's prompt once, as they wrote it.
const largePromptTag = "<cast_large_prompt>"

// LargePromptTurn is the turn that follows a prompt of n characters
// delivered by DeliverLarge: it points the model at that message.
func LargePromptTurn(n int) string {
	return fmt.Sprintf("%s\nThe user's message is the previous user message (%d characters, more than Codex takes in one turn, so it was added to the conversation before this turn). Respond to it now as you would have if it had been sent as this turn.\n</cast_large_prompt>", largePromptTag, n)
}

// Delivered is the thread a large prompt was added to.
type Delivered struct {
	ThreadID string
	Path     string // its rollout file
}

// DeliverLarge adds prompt, as a user message, to the history of a Codex
// thread through `bin app-server` (thread/inject_items, which has no length
// cap), so that the next turn, run with LargePromptTurn as its input, has
// the model answer it. With threadID and path empty it starts a new thread
// in cwd; else it appends to that thread's rollout. env must set
// CODEX_HOME. The server is stopped before DeliverLarge returns, once the
// rollout holds the message, so `codex exec resume` can run the turn.
func DeliverLarge(ctx context.Context, bin string, env []string, cwd, threadID, path, prompt string) (Delivered, error) {
	s, err := StartAppServer(ctx, bin, env, cwd)
	if err != nil {
		return Delivered{}, fmt.Errorf("codex: start app-server to deliver a long prompt: %w", err)
	}
	defer s.Close()
	var res struct {
		Thread Thread `json:"thread"`
	}
	if threadID == "" && path == "" {
		err = s.Call(ctx, "thread/start", map[string]any{"cwd": cwd}, &res)
	} else {
		p := map[string]any{"threadId": threadID}
		if path != "" {
			p["path"] = path
		}
		err = s.Call(ctx, "thread/resume", p, &res)
	}
	if err != nil {
		return Delivered{}, deliverErr(s, err)
	}
	item := map[string]any{
		"type": "message", "role": "user",
		"content": []map[string]any{{"type": "input_text", "text": prompt}},
	}
	if err := s.Call(ctx, "thread/inject_items", map[string]any{"threadId": res.Thread.ID, "items": []any{item}}, nil); err != nil {
		return Delivered{}, deliverErr(s, err)
	}
	d := Delivered{ThreadID: res.Thread.ID, Path: res.Thread.Path}
	if err := s.Close(); err != nil {
		return Delivered{}, err
	}
	if d.Path == "" {
		return Delivered{}, fmt.Errorf("codex: app-server named no rollout file for thread %s", d.ThreadID)
	}
	if _, err := os.Stat(d.Path); err != nil {
		return Delivered{}, fmt.Errorf("codex: the long prompt was not saved to thread %s: %w", d.ThreadID, err)
	}
	return d, nil
}

func deliverErr(s *AppServer, err error) error {
	if why := lastLine(s.Stderr()); why != "" && !strings.Contains(err.Error(), why) {
		return fmt.Errorf("codex: deliver a long prompt: %w (%s)", err, why)
	}
	return fmt.Errorf("codex: deliver a long prompt: %w", err)
}
