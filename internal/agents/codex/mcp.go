package codex

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
)

// TakeMCP gives Codex cast's history tool as -c config overrides (TOML
// values): no file is written.
func (Driver) TakeMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	t.Args = append(t.Args,
		"-c", "mcp_servers."+s.Name+".command="+strconv.Quote(s.Command),
		"-c", "mcp_servers."+s.Name+".args="+tomlArray(s.HistoryArgs),
		"-c", "mcp_servers."+s.Name+".env="+tomlTable(s.Env))
	return "", nil
}

// tomlArray is strs as an inline TOML array.
func tomlArray(strs []string) string {
	parts := make([]string, len(strs))
	for i, s := range strs {
		parts[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// tomlTable is env as an inline TOML table, keys sorted.
func tomlTable(env map[string]string) string {
	parts := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, k+"="+strconv.Quote(env[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
