// Package mcpserver is `cast mcp`: an MCP server over stdio that cast
// registers in the agents it launches. It gives the agent a read-only tool
// to page its thread's history, and the permission tool Claude Code's
// --permission-prompt-tool calls, which waits on a person through the
// control plane (`cast approve` / `cast deny`). Call runs one of those tools
// in process (`cast mcp call`) for agents without an MCP client.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/tick"
)

// Tool names; Claude sees them as mcp__cast__<name>.
const (
	PermissionTool = "permission"
	HistoryTool    = "history"
)

// AllTools are the tools the server has, the names Config.Tools takes.
var AllTools = []string{HistoryTool, PermissionTool}

// Config is what the server serves.
type Config struct {
	SessionID string // the session the agent runs in (CAST_SESSION)
	Version   string
	// Tools limits the tools served (names); empty serves all.
	Tools []string
}

func (c Config) serves(name string) bool {
	if len(c.Tools) == 0 {
		return true
	}
	for _, t := range c.Tools {
		if t == name {
			return true
		}
	}
	return false
}

type permissionIn struct {
	ToolName  string         `json:"tool_name" jsonschema:"the tool the agent wants to run"`
	Input     map[string]any `json:"input,omitempty" jsonschema:"the tool's input"`
	ToolUseID string         `json:"tool_use_id,omitempty" jsonschema:"the tool call's id"`
}

type historyIn struct {
	ThreadID  string `json:"thread_id,omitempty" jsonschema:"cast session id (default: this session)"`
	BeforeSeq int64  `json:"before_seq,omitempty" jsonschema:"read messages before this seq (default: the newest)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many messages (default 50, at most 200)"`
}

// HistoryDescription is what the model is told the history tool does.
const HistoryDescription = "Read earlier messages of this conversation (read-only), newest last. Use before_seq to page back."

// HistoryInputSchema is the JSON Schema of the history tool's arguments,
// the one the MCP server advertises, for bridges that declare the tool
// themselves (pi's extension).
func HistoryInputSchema() (json.RawMessage, error) {
	sch, err := jsonschema.For[historyIn](nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(sch)
}

// New builds the server over c.
func New(c *client.Client, cfg Config) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "cast", Version: cfg.Version}, nil)
	if cfg.serves(PermissionTool) {
		mcp.AddTool(s, &mcp.Tool{Name: PermissionTool, Description: "Ask the person running cast whether a tool may run. Answers {behavior: allow|deny}."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in permissionIn) (*mcp.CallToolResult, any, error) {
				return askPermission(ctx, c, cfg.SessionID, in)
			})
	}
	if cfg.serves(HistoryTool) {
		mcp.AddTool(s, &mcp.Tool{Name: HistoryTool, Description: HistoryDescription},
			func(ctx context.Context, _ *mcp.CallToolRequest, in historyIn) (*mcp.CallToolResult, any, error) {
				return history(ctx, c, cfg.SessionID, in)
			})
	}
	return s
}

func askPermission(ctx context.Context, c *client.Client, sessionID string, in permissionIn) (*mcp.CallToolResult, any, error) {
	rid := ids.NewClientID()
	if in.ToolUseID != "" && ids.ValidClientID(in.ToolUseID) {
		rid = in.ToolUseID
	}
	input, _ := json.Marshal(in.Input)
	resp, err := waitPermission(ctx, c, &castv1.RequestPermissionRequest{
		SessionId: sessionID, RequestId: rid, ToolName: in.ToolName, Input: string(input)})
	var out map[string]any
	switch {
	case err != nil:
		out = map[string]any{"behavior": "deny", "message": "cast could not ask the person: " + err.Error()}
	case resp.Allow:
		if in.Input == nil {
			in.Input = map[string]any{}
		}
		out = map[string]any{"behavior": "allow", "updatedInput": in.Input}
	default:
		msg := resp.Message
		if msg == "" {
			msg = "The person denied this tool run."
		}
		out = map[string]any{"behavior": "deny", "message": msg}
	}
	b, _ := json.Marshal(out)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
}

// askStable: a wait that lasted this long reached the control plane and
// waited there, so its end (the control plane's bound on one wait, or its
// stop) starts a new retry budget.
const askStable = 5 * time.Second

// waitPermission waits for the person's answer to req. The control plane
// keeps the request in etcd under its id, so asking again with it waits on
// the same request, answered or not: a control plane that went away
// (UNAVAILABLE, or CANCELED as it ends its calls on a stop) and its bound
// on one wait (DEADLINE_EXCEEDED) are asked again for as long as the agent
// waits, until the control plane has not taken a wait for retry.Outage's
// limit. Before, the first such error denied the tool: the agent went on
// without it, and the person's later answer reached no one.
func waitPermission(ctx context.Context, c *client.Client, req *castv1.RequestPermissionRequest) (*castv1.RequestPermissionResponse, error) {
	b := retry.Budget{Policy: retry.Outage}
	for {
		asked := time.Now()
		resp, err := c.Sessions.RequestPermission(ctx, req)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		switch status.Code(err) {
		case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		default:
			return nil, err
		}
		pause, ok := b.Ended(time.Now(), time.Since(asked) >= askStable)
		if !ok {
			return nil, err
		}
		if !tick.Sleep(ctx, pause) {
			return nil, ctx.Err()
		}
	}
}

func history(ctx context.Context, c *client.Client, sessionID string, in historyIn) (*mcp.CallToolResult, any, error) {
	id := in.ThreadID
	if id == "" {
		id = sessionID
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 200)
	end := in.BeforeSeq - 1
	if in.BeforeSeq <= 0 {
		end = 0
	}
	sess, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: id})
	if err != nil {
		return nil, nil, err
	}
	if end <= 0 || end > sess.LastSeq {
		end = sess.LastSeq
	}
	start := max(1, end-int64(limit)+1)
	var b strings.Builder
	err = c.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: id, StartSeq: start, EndSeq: end}, func(m *castv1.Message) error {
		if m.Kind != castv1.MessageKind_MESSAGE_KIND_INTERNAL {
			fmt.Fprintf(&b, "#%d %s: %s\n", m.Seq, strings.ToLower(strings.TrimPrefix(m.Kind.String(), "MESSAGE_KIND_")), render(m))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if start > 1 {
		fmt.Fprintf(&b, "(earlier: call again with before_seq=%d)\n", start)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, nil, nil
}

func render(m *castv1.Message) string {
	switch m.Kind {
	case castv1.MessageKind_MESSAGE_KIND_TOOL_CALL:
		return m.ToolCall.GetName() + " " + m.ToolCall.GetInput()
	case castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT:
		return m.ToolResult.GetOutput()
	}
	return m.Text
}

// Serve runs the server on stdio until ctx ends or the client leaves.
func Serve(ctx context.Context, c *client.Client, cfg Config) error {
	return New(c, cfg).Run(ctx, &mcp.StdioTransport{})
}
