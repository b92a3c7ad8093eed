package opencode

import (
	"encoding/json"

	"github.com/cast-dev/cast/internal/agents"
)

// TakeMCP adds cast through OPENCODE_CONFIG_CONTENT, which opencode 1.18
// merges over its config files: no file is written and the session id is
// the turn's own. Content the node's agents config already put there is
// kept. MCP tools run without a prompt under opencode's default
// permissions; an operator config that asks for every tool would need
// "cast_history": "allow" (not forced here, as merging into a permission
// given as a string would replace it).
func (Driver) TakeMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	const key = "OPENCODE_CONFIG_CONTENT"
	cfg := map[string]any{}
	if v := agents.EnvValue(t.Env, key); v != "" {
		if err := json.Unmarshal([]byte(v), &cfg); err != nil {
			return "OPENCODE_CONFIG_CONTENT is not plain JSON: " + err.Error(), nil
		}
	}
	agents.SetMCPServer(cfg, "mcp", s.Name, map[string]any{
		"type": "local", "command": append([]string{s.Command}, s.HistoryArgs...),
		"environment": s.Env,
		"enabled":     true,
	})
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	t.Env = append(t.Env, key+"="+string(b)) // last wins
	return "", nil
}
