package agents

import (
	"encoding/json"
	"slices"
	"strings"
)

// MCPServer is cast's MCP server as a turn's CLI is to start it.
type MCPServer struct {
	Name      string            // the server's name in every agent's config ("cast")
	Command   string            // the cast CLI
	Args      []string          // its arguments serving every tool
	Env       map[string]string // what `cast mcp` needs about the session (CAST_SESSION, ...)
	SessionID string
	// Dir is a folder of cast's own for files handed to the CLI: never the
	// user's checkout or the agent's folder, which may be the user's.
	Dir string
	// The tools: PermissionTool answers approvals, HistoryTool reads the
	// session's history (read-only; HistoryArgs serve only it).
	PermissionTool, HistoryTool string
	HistoryArgs                 []string
	HistoryDescription          string
	HistorySchema               json.RawMessage
}

// SetMCPServer puts entry under name in the server map at cfg[key] (a
// CLI's decoded config: Gemini's "mcpServers", OpenCode's "mcp"), making
// the map when cfg has none; the other servers stay as they are.
func SetMCPServer(cfg map[string]any, key, name string, entry any) {
	servers, _ := cfg[key].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	servers[name] = entry
	cfg[key] = servers
}

// MCPTurn is what giving a turn cast's MCP server may change.
type MCPTurn struct {
	Args []string // extra CLI arguments, appended
	Env  []string // the turn's own variables (last wins)
	Home string   // the turn's HOME when Env does not set one
	// UserEnv is set when the agent runs in the user's own home, with the
	// user's environment: its settings files are the user's and are never
	// rewritten.
	UserEnv []string
}

// Getenv looks key up as the turn's CLI sees it: the turn's own
// variables, else the user's.
func (t *MCPTurn) Getenv(key string) string {
	if v := EnvValue(t.Env, key); v != "" {
		return v
	}
	return EnvValue(t.UserEnv, key)
}

// MCPTaker is a Driver whose CLI takes cast's MCP tools, each in the form
// it reads: flags, environment, or a file of cast's own under s.Dir.
// skipped, when not empty, says why the turn runs without them.
type MCPTaker interface {
	TakeMCP(s MCPServer, t *MCPTurn) (skipped string, err error)
}

// EnvValue returns the last value of key in env ("" when absent): the
// value a process started with env sees.
func EnvValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// WithoutEnv returns env without any entry for keys, so a value appended
// after it is the only one the process sees.
func WithoutEnv(env []string, keys ...string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(keys, k) {
			out = append(out, kv)
		}
	}
	return out
}
