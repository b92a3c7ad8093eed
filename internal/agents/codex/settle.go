package codex

import (
	"bytes"
	"encoding/json"
)

// Settled implements agents.TailSettler: a rollout's trailing run of
// message records (response_item messages and reasoning, and their
// event_msg copies) waits until a record of another kind follows. Codex
// writes a message's item and its copy back to back and ends every turn
// with other events (token_count, task_complete), so a follower reading
// mid-write never parses one half of a pair without the other.
func (Driver) Settled(b []byte) int {
	end := len(b)
	for end > 0 {
		start := bytes.LastIndexByte(b[:end-1], '\n') + 1
		if line := bytes.TrimSpace(b[start:end]); len(line) > 0 && !messageRecord(line) {
			return end
		}
		end = start
	}
	return 0
}

// messageRecord says whether a rollout line holds a message or its copy.
func messageRecord(line []byte) bool {
	var env struct {
		Type    string `json:"type"`
		Payload struct {
			Type string `json:"type"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &env) != nil {
		return false
	}
	switch env.Type {
	case lineResponseItem:
		return env.Payload.Type == "message" || env.Payload.Type == "reasoning"
	case lineEventMsg:
		switch env.Payload.Type {
		case "user_message", "agent_message", "agent_reasoning", "item_completed":
			return true
		}
	}
	return false
}
