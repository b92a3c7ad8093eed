package codex

import (
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
)

// ReadSubagent implements agents.SubagentReader: a thread another thread
// spawned (session_meta.source {"subagent":…}), its parent from
// thread_spawn. The spawning call is found in the parent's rollout beside
// it (sessions/YYYY/MM/DD/, or sessions/ itself): the spawn_agent call
// whose output names this thread ({"agent_id":"<id>",…}, Codex 0.171).
func (Reader) ReadSubagent(path string) (agents.Subagent, bool, error) {
	p, err := kit.DecodeFile(path, Parse)
	if err != nil || p.Subagent == nil {
		return agents.Subagent{}, false, err
	}
	s := *p.Subagent
	if s.ParentNativeID != "" && p.SessionID != "" {
		s.CallID = spawnCall(path, s.ParentNativeID, p.SessionID)
	}
	return s, true, nil
}

// spawnCall is the call in the parent's rollout whose output names the
// thread id; "" when the parent's rollout is not beside the run's.
func spawnCall(path, parent, id string) string {
	dir := filepath.Dir(path)
	for range 4 { // up to CODEX_HOME from sessions/YYYY/MM/DD or sessions
		if filepath.Base(dir) == "sessions" {
			break
		}
		dir = filepath.Dir(dir)
	}
	if filepath.Base(dir) != "sessions" {
		return ""
	}
	pp := Driver{}.FindSession(filepath.Dir(dir), parent)
	if pp == "" {
		return ""
	}
	pr, err := kit.DecodeFile(pp, Parse)
	if err != nil {
		return ""
	}
	for _, m := range pr.Messages {
		if m.ToolResult != nil && strings.Contains(m.ToolResult.Output, `"agent_id":"`+id+`"`) {
			return m.ToolResult.CallID
		}
	}
	return ""
}
