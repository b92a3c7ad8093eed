package codex

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// Route is how a conversation gets into a running app-server.
type Route int

const (
	// RouteResumePath writes the rollout (as Writer does) and opens it
	// with thread/resume {threadId, path}. The thread keeps cast's id, its
	// file is the one cast wrote, and Codex's UI shows the turns.
	RouteResumePath Route = iota
	// RouteInjectItems starts a new thread (thread/start) and appends the
	// history with thread/inject_items. Codex picks the thread id, and the
	// injected items are model history only: thread/read shows no turns
	// for them. It needs no experimental API.
	RouteInjectItems
)

func (r Route) String() string {
	switch r {
	case RouteResumePath:
		return "resume-path"
	case RouteInjectItems:
		return "inject-items"
	}
	return fmt.Sprintf("route(%d)", int(r))
}

// Thread is the part of a thread object cast uses.
type Thread struct {
	ID   string `json:"id"`
	Path string `json:"path"`
}

// Imported says where an import landed.
type Imported struct {
	Thread  Thread
	Omitted int // neutral messages left out by the caps (see MaxItems)
}

// Import loads msgs into the app-server s as a thread ready for turn/start.
// t.Home must be the CODEX_HOME the server runs with.
func Import(ctx context.Context, s *AppServer, route Route, t agents.Target, msgs []transcript.Message) (Imported, error) {
	msgs = transcript.SinceCompaction(msgs) // as every writer (agents.WriterFor)
	var res struct {
		Thread Thread `json:"thread"`
	}
	switch route {
	case RouteResumePath:
		w, err := Writer{}.Write(t, msgs)
		if err != nil {
			return Imported{}, err
		}
		if err := s.Call(ctx, "thread/resume", map[string]any{"threadId": w.NativeID, "path": w.Path}, &res); err != nil {
			return Imported{}, err
		}
		if res.Thread.ID != w.NativeID {
			return Imported{}, fmt.Errorf("codex: resumed thread %q, want %q", res.Thread.ID, w.NativeID)
		}
		return Imported{Thread: res.Thread, Omitted: w.Omitted}, nil
	case RouteInjectItems:
		items, omitted := Items(t.SessionID, msgs)
		if err := s.Call(ctx, "thread/start", map[string]any{"cwd": t.Cwd}, &res); err != nil {
			return Imported{}, err
		}
		if len(items) > 0 {
			if err := s.Call(ctx, "thread/inject_items", map[string]any{"threadId": res.Thread.ID, "items": items}, nil); err != nil {
				return Imported{}, err
			}
		}
		return Imported{Thread: res.Thread, Omitted: omitted}, nil
	}
	return Imported{}, fmt.Errorf("codex: unknown import route %v", route)
}

// TurnResult is what a finished turn produced.
type TurnResult struct {
	Status string          // "completed", "failed", "interrupted"
	Text   string          // the last agent message
	Raw    json.RawMessage // the turn object from turn/completed
}

// RunTurn sends text as a user turn on thread and waits for it to finish.
func (s *AppServer) RunTurn(ctx context.Context, threadID, text string) (TurnResult, error) {
	from := s.Mark()
	input := []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}}
	if err := s.Call(ctx, "turn/start", map[string]any{"threadId": threadID, "input": input}, nil); err != nil {
		return TurnResult{}, err
	}
	n, _, err := s.WaitFor(ctx, from, "turn/completed", func(p json.RawMessage) bool {
		var v struct {
			ThreadID string `json:"threadId"`
		}
		return json.Unmarshal(p, &v) == nil && v.ThreadID == threadID
	})
	if err != nil {
		return TurnResult{}, err
	}
	var v struct {
		Turn struct {
			Status string `json:"status"`
			Items  []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"items"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(n.Params, &v)
	tr := TurnResult{Status: v.Turn.Status}
	_ = json.Unmarshal(n.Params, &struct {
		Turn *json.RawMessage `json:"turn"`
	}{&tr.Raw})
	for _, it := range v.Turn.Items {
		if it.Type == "agentMessage" {
			tr.Text = it.Text
		}
	}
	return tr, nil
}
