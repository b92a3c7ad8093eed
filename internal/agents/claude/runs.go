package claude

import (
	"encoding/json"
	"regexp"

	"github.com/cast-dev/cast/internal/agents"
)

// ReadRuns implements agents.RunsReader: the subagents' runs an older
// Claude Code kept inside the session's own file, as sidechain records
// beside the main chain (2.1 writes each run to
// <session>/subagents/agent-*.jsonl instead, which ReadSubagent tells).
// Read leaves them out of the conversation (counted as sub-agent
// records); here each run is read on its own, so `cast import` keeps it as
// a worker of the session. A file that is itself a run has none.
func (Reader) ReadRuns(path string) ([]agents.Run, error) {
	_, st, err := ReadFile(path)
	if err != nil || st.Subagent != nil || len(st.side) == 0 {
		return nil, err
	}
	var runs []agents.Run
	for _, g := range groupRuns(st.side) {
		run := agents.Run{
			Subagent: agents.Subagent{Kind: "sidechain", ParentNativeID: g[0].rec.SessionID, CallID: st.calls[g.agentID()]},
			Kept:     map[string]int{kindSidechain: len(g)},
		}
		var rs Stats
		run.Messages = rs.messages(g)
		run.Skipped = rs.Kinds
		if len(run.Messages) > 0 {
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// sidechainRE finds a sidechain record, as Claude Code writes it or
// pretty-printed.
var sidechainRE = regexp.MustCompile(`"isSidechain":\s*true`)

// MayHoldRuns implements agents.RunsReader: only sidechain records are.
func (Reader) MayHoldRuns(data []byte) bool { return sidechainRE.Match(data) }

// run is one subagent's sidechain records, in file order.
type run []entry

func (g run) agentID() string {
	for _, e := range g {
		if e.rec.AgentID != "" {
			return e.rec.AgentID
		}
	}
	return ""
}

// groupRuns splits sidechain records into runs, in file order: a record
// joins the run of its agentId, else of its parent record, else starts a
// run when it is a root (no parent), else continues the last run (older
// files stamp agentId on some records only, and their chains can dangle).
func groupRuns(side []entry) []run {
	var runs []run
	byUUID, byAgent := map[string]int{}, map[string]int{}
	for _, e := range side {
		i, ok := byAgent[e.rec.AgentID]
		if !ok || e.rec.AgentID == "" {
			var p string
			if e.rec.ParentUUID != nil {
				p = *e.rec.ParentUUID
			}
			i, ok = byUUID[p]
			switch {
			case ok:
			case p == "" || len(runs) == 0 || (e.rec.AgentID != "" && runs[len(runs)-1].agentID() != ""):
				runs, i = append(runs, nil), len(runs)
			default:
				i = len(runs) - 1
			}
		}
		runs[i] = append(runs[i], e)
		if e.rec.UUID != "" {
			byUUID[e.rec.UUID] = i
		}
		if e.rec.AgentID != "" {
			byAgent[e.rec.AgentID] = i
		}
	}
	return runs
}

// noteCall records which tool call's result a main-chain record carries
// for a subagent (its agentId): the run's spawning call.
func (st *Stats) noteCall(rec record) {
	if rec.AgentID == "" || rec.Type != "user" {
		return
	}
	var m struct {
		Content []block `json:"content"`
	}
	if json.Unmarshal(rec.Message, &m) != nil {
		return
	}
	for _, b := range m.Content {
		if b.Type == "tool_result" && b.ToolUseID != "" {
			if st.calls == nil {
				st.calls = map[string]string{}
			}
			st.calls[rec.AgentID] = b.ToolUseID
			return
		}
	}
}
