package codex

import (
	"bytes"
	"fmt"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/cast-dev/cast/internal/agents"
)

// TakeMCP gives Codex cast's history tool as -c config overrides (TOML
// values): no file is written, so the user's config.toml stays as it is.
func (Driver) TakeMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	key := "mcp_servers." + s.Name // "cast": a bare TOML key
	for _, kv := range []struct {
		name string
		v    any
	}{{"command", s.Command}, {"args", s.HistoryArgs}, {"env", s.Env}} {
		v, err := tomlValue(kv.v)
		if err != nil {
			return "", fmt.Errorf("codex: the history tool's %s as TOML: %w", kv.name, err)
		}
		t.Args = append(t.Args, "-c", key+"."+kv.name+"="+v)
	}
	return "", nil
}

// tomlValue is v as one TOML value on one line (tables and arrays inline),
// what Codex parses after a -c key's "=". The library escapes what TOML
// needs escaped (a Go escape such as \x7f is not TOML).
func tomlValue(v any) (string, error) {
	var b bytes.Buffer
	e := toml.NewEncoder(&b)
	e.SetTablesInline(true)
	e.SetArraysMultiline(false)
	if err := e.Encode(map[string]any{"v": v}); err != nil {
		return "", err
	}
	out, ok := strings.CutPrefix(strings.TrimSuffix(b.String(), "\n"), "v = ")
	if !ok || strings.Contains(out, "\n") {
		return "", fmt.Errorf("not one inline value: %q", b.String())
	}
	return out, nil
}
