package pi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
)

// kindRun is a subagent's run a tool result keeps in its details.
const kindRun = "subagent run in a tool result"

// ReadRuns implements agents.RunsReader. pi has no subagent tool of its
// own; its subagent extension (examples/extensions/subagent in the pinned
// package) runs each subagent as `pi --mode json -p --no-session`, so no
// file of the run exists, and keeps the run's messages in its tool
// result's details (results[].messages, pi's own message shape). Read
// leaves them out (counted); here each is read as a run of the session,
// the tool call its result answers being the spawning call.
func (Reader) ReadRuns(path string) ([]agents.Run, error) {
	d, err := kit.DecodeFile(path, DecodeFrom)
	return d.runs, err
}

// MayHoldRuns implements agents.RunsReader: a run is in a tool result's
// details.
func (Reader) MayHoldRuns(data []byte) bool {
	return bytes.Contains(data, []byte(`"details"`)) && bytes.Contains(data, []byte(`"messages"`))
}

// runsIn are the subagents' runs e's tool result keeps in its details.
func runsIn(e entry) []agents.Run {
	m := e.Message
	if e.Type != "message" || m == nil || m.Role != "toolResult" || len(m.Details) == 0 {
		return nil
	}
	var det struct {
		Results []struct {
			Agent    string    `json:"agent"`
			Messages []message `json:"messages"`
		} `json:"results"`
	}
	if json.Unmarshal(m.Details, &det) != nil {
		return nil // another tool's details: nothing of a run in them
	}
	var out []agents.Run
	for i, res := range det.Results {
		if len(res.Messages) == 0 {
			continue
		}
		run := agents.Run{Subagent: agents.Subagent{Kind: "subagent", CallID: m.ToolCallID}, Kept: map[string]int{kindRun: 1}}
		if res.Agent != "" {
			run.Kind = "subagent (" + res.Agent + ")"
		}
		var skipped kit.Skips
		for j := range res.Messages {
			me := entry{Type: "message", ID: fmt.Sprintf("%s/run%d/%d", e.ID, i, j), Timestamp: e.Timestamp, Message: &res.Messages[j]}
			run.Messages = append(run.Messages, toNeutral(me, skipped.Add)...)
		}
		run.Skipped = skipped
		out = append(out, run)
	}
	return out
}
