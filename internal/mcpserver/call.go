package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cast-dev/cast/internal/client"
)

// ErrToolFailed is matched by Call's error when the tool itself reported a
// failure (the MCP result's isError), as opposed to a bad call.
var ErrToolFailed = errors.New("tool failed")

// Call runs one of the server's tools once, in process, through a real MCP
// client session over an in-memory transport, and returns the tool's text.
// It is `cast mcp call`: the bridge for agents without an MCP client (pi's
// extension runs it), so they get the very tool the others get over stdio,
// schema validation included.
func Call(ctx context.Context, c *client.Client, cfg Config, tool string, args json.RawMessage) (string, error) {
	if !cfg.serves(tool) {
		return "", fmt.Errorf("unknown tool %q (served: %s)", tool, strings.Join(cfg.Tools, ", "))
	}
	var in map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return "", fmt.Errorf("tool arguments are not a JSON object: %w", err)
		}
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(c, cfg).Connect(ctx, st, nil)
	if err != nil {
		return "", err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cast-call", Version: cfg.Version}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: in})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, part := range res.Content {
		if t, ok := part.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%w: %s", ErrToolFailed, b.String())
	}
	return b.String(), nil
}
