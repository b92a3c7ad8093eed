package repair

import (
	"fmt"

	"github.com/cast-dev/cast/internal/transcript"
)

// UniqueCallIDs renames repeated tool call ids. Some agents number calls
// per turn (call_0, call_1, ...), so one id can name several calls in a long
// conversation; an agent that finds a call's result by id (Codex pairs
// outputs by id, OpenCode keeps a call and its result in one part found by
// id) would pair the wrong output or drop a call. A repeated call id gets a
// suffix (call_0_cast2, ...). A result goes to the newest call with its id
// that has no result yet (else the newest). msgs is not modified; it is
// returned as is when no id repeats.
func UniqueCallIDs(msgs []transcript.Message) []transcript.Message {
	seen := map[string]int{}       // original id -> calls seen
	current := map[string]string{} // original id -> id of its newest call
	open := map[string][]string{}  // original id -> renamed ids still without a result
	var out []transcript.Message
	for i, m := range msgs {
		switch {
		case m.Kind == transcript.KindToolCall && m.ToolCall != nil:
			id := m.ToolCall.ID
			seen[id]++
			nid := id
			if seen[id] > 1 {
				nid = fmt.Sprintf("%s_cast%d", id, seen[id])
				if out == nil {
					out = append([]transcript.Message(nil), msgs...)
				}
				c := *m.ToolCall
				c.ID = nid
				out[i].ToolCall = &c
			}
			current[id] = nid
			open[id] = append(open[id], nid)
		case m.Kind == transcript.KindToolResult && m.ToolResult != nil:
			id := m.ToolResult.CallID
			if seen[id] < 2 {
				if q := open[id]; len(q) > 0 {
					open[id] = q[:len(q)-1]
				}
				continue // the id is not repeated (yet): nothing to rename
			}
			nid := current[id]
			if q := open[id]; len(q) > 0 {
				nid, open[id] = q[len(q)-1], q[:len(q)-1]
			}
			if nid != id {
				if out == nil {
					out = append([]transcript.Message(nil), msgs...)
				}
				r := *m.ToolResult
				r.CallID = nid
				out[i].ToolResult = &r
			}
		}
	}
	if out == nil {
		return msgs
	}
	return out
}
