package claude

import (
	"encoding/json"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
)

// TakeMCP gives Claude Code cast's MCP server through a config file of
// cast's own named on the command line, with its permission tool as the
// --permission-prompt-tool, so a tool that needs approval waits on a
// person (`cast approve`/`cast deny`) instead of being refused.
func (Driver) TakeMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	cfg := map[string]any{"mcpServers": map[string]any{s.Name: map[string]any{
		"type": "stdio", "command": s.Command, "args": s.Args, "env": s.Env,
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, "claude-"+s.SessionID+".json")
	if err := fsutil.WritePrivate(path, b); err != nil {
		return "", err
	}
	// The read-only history tool needs no approval. --allowedTools takes
	// several values, so it stays last.
	t.Args = append(t.Args, "--mcp-config", path, "--permission-prompt-tool", "mcp__"+s.Name+"__"+s.PermissionTool,
		"--allowedTools", "mcp__"+s.Name+"__"+s.HistoryTool)
	return "", nil
}
