package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

func init() { agents.Register("claude", Driver{}, agents.FileCodec(Reader{}, Writer{})) }

// Driver runs Claude Code headless (agents.Driver).
type Driver struct{}

func (Driver) FindSession(home, id string) string {
	if id == "" {
		return ""
	}
	return agents.NewestMatch(filepath.Join(home, "projects", "*", id+".jsonl"))
}

// SessionID: the file is named after its session.
func (Driver) SessionID(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".jsonl")
}

// ParseTail parses appended records: a suffix's first record points at a
// parent before it, and the Reader then keeps the records in file order,
// as Claude does.
func (Driver) ParseTail(b []byte, _ int) ([]transcript.Message, error) {
	msgs, _, err := Parse(bytes.NewReader(b))
	return msgs, err
}

// windows are Claude's rate limit types: each one's length, and the model
// a per-model weekly window is for.
var windows = map[string]quota.Window{
	"five_hour":        {WindowMinutes: 300},
	"seven_day":        {WindowMinutes: 7 * 24 * 60},
	"seven_day_opus":   {WindowMinutes: 7 * 24 * 60, Model: "opus"},
	"seven_day_sonnet": {WindowMinutes: 7 * 24 * 60, Model: "sonnet"},
}

// Stdout reads claude's stream-json events: rate_limit_event carries a
// usage window (from the provider's anthropic-ratelimit-unified-*
// headers), and an error result carries the message and HTTP status that
// classify needs.
func (Driver) Stdout(line []byte) agents.Event {
	var ev struct {
		Type  string `json:"type"`
		Limit *struct {
			Status      string   `json:"status"`
			ResetsAt    int64    `json:"resetsAt"`
			Type        string   `json:"rateLimitType"`
			Utilization *float64 `json:"utilization"`
		} `json:"rate_limit_info"`
		IsError bool   `json:"is_error"`
		Result  string `json:"result"`
		Status  *int   `json:"api_error_status"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return agents.Event{}
	}
	switch {
	case ev.Type == "rate_limit_event" && ev.Limit != nil && ev.Limit.Type != "":
		w := windows[ev.Limit.Type]
		w.Name = ev.Limit.Type
		if ev.Limit.Utilization != nil {
			w.UsedPercent = *ev.Limit.Utilization * 100
		} else if ev.Limit.Status == "rejected" {
			w.UsedPercent = 100
		}
		if ev.Limit.ResetsAt > 0 {
			w.ResetsAt = time.Unix(ev.Limit.ResetsAt, 0).UTC()
		}
		return agents.Event{Limit: &w}
	case ev.Type == "result" && ev.IsError:
		msg := ev.Result
		if ev.Status != nil {
			msg = fmt.Sprintf("API error %d: %s", *ev.Status, msg)
		}
		return agents.Event{Err: msg}
	}
	return agents.Event{}
}

// StoppedExit: Claude Code exits 0 on SIGINT mid-turn (2.1.197), with
// nothing on stdout or, when the abort reached the turn first, what it
// prints for a turn that ended in an execution error: "Execution error"
// in text mode, an error_during_execution result in stream-json. (It
// exits 143 on SIGTERM, which its wait status tells.) A finished turn
// prints its answer or a result of another kind; its failures exit 1.
func (Driver) StoppedExit(exit int, stdout, _ string) bool {
	types, text := agents.StdoutEvents(stdout)
	for _, l := range text {
		if l != "Execution error" {
			return false
		}
	}
	return exit == 0 && types["result"] == types["result/error_during_execution"]
}

// CwdFolders: Claude keeps a project folder per cwd (sessions, memory).
func (Driver) CwdFolders(home, cwd string) []string { return []string{ProjectDir(home, cwd)} }

// SessionFiles: one JSONL file per session in each project's folder, then
// the subagents' runs a level deeper, under the session's own folder
// (<session>/subagents/agent-<agentId>.jsonl, sidechain records only,
// with an agent-<agentId>.meta.json naming the spawning tool call; what
// the pinned 2.1.197 writes for its Agent tool).
func (Driver) SessionFiles(home string) []string {
	return []string{
		filepath.Join(home, "projects", "*", "*.jsonl"),
		filepath.Join(home, "projects", "*", "*", "subagents", "agent-*.jsonl"),
	}
}
