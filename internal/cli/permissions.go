package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/mcpserver"
	"github.com/cast-dev/cast/internal/validate"
)

func (a *app) approveCmd(allow bool) *cobra.Command {
	var rid, msg string
	use, short := "approve ID [--request RID]", "Let a session's agent run the tool it is waiting on"
	if !allow {
		use, short = "deny ID [--request RID] [-m WHY]", "Refuse the tool a session's agent is waiting on"
	}
	cmd := onSession(&cobra.Command{
		Use:   use,
		Short: short,
	}, sessionUse{hint: "cast " + strings.Fields(use)[0] + " ID; `cast ls` shows sessions waiting on a permission"}, func(cmd *cobra.Command, id string, _ []string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: id, RequestId: rid, Allow: allow, Message: msg})
			return a.replyAs(err, func() any {
				return map[string]any{"id": id, "request_id": resp.RequestId, "tool": resp.ToolName, "allow": allow}
			}, func() error {
				verb := "approved"
				if !allow {
					verb = "denied"
				}
				fmt.Fprintf(a.out, "%s %s for %s\n", verb, resp.ToolName, id)
				fmt.Fprintf(a.errOut, "follow it with `cast watch %s`\n", id)
				return nil
			})
		})
	})

	cmd.Flags().StringVar(&rid, "request", "", "request id (default: the oldest pending one)")
	if !allow {
		cmd.Flags().StringVarP(&msg, "message", "m", "", "why, for the agent")
	}
	return cmd
}

func (a *app) mcpCmd() *cobra.Command {
	var id string
	var tools []string
	cmd := &cobra.Command{
		Use:    "mcp",
		Short:  "Serve cast's MCP tools on stdio (history, permission) for an agent cast runs",
		Args:   cobra.NoArgs,
		Hidden: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, t := range tools {
				if !slices.Contains(mcpserver.AllTools, t) {
					// Served as given, it would serve nothing by that name.
					return usagef("--tools %q is no tool of cast's; use %s", t, strings.Join(mcpserver.AllTools, ", "))
				}
			}
			var err error
			if id, err = mcpSession(cmd); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			return mcpserver.Serve(cmd.Context(), c, mcpserver.Config{SessionID: id, Version: "dev", Tools: tools})
		},
	}
	cmd.Flags().StringSliceVar(&tools, "tools", nil, "serve only these tools (history, permission); default: all")
	cmd.AddCommand(a.mcpCallCmd())
	return cmd
}

// mcpSession is the session cast mcp serves, CAST_SESSION (the node sets
// it for the agents it runs): unset and malformed are two mistakes, said
// apart, so a wrong value is not looked for as a missing one.
func mcpSession(cmd *cobra.Command) (string, error) {
	id := os.Getenv("CAST_SESSION")
	if id == "" {
		return "", usagef("%s runs inside a cast session (CAST_SESSION is not set)", cmd.CommandPath())
	}
	if err := validate.Check(validate.SessionID, "CAST_SESSION", id); err != nil {
		return "", usagef("%s runs inside a cast session: %v", cmd.CommandPath(), err)
	}
	return id, nil
}

// mcpCallCmd runs one read-only tool once and prints its text: the bridge
// for agents without an MCP client (pi's extension), through the same MCP
// tool and schema the others reach over stdio.
func (a *app) mcpCallCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "call TOOL [ARGS_JSON]",
		Short: "Call one of cast's read-only MCP tools (history) once and print its result",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := mcpSession(cmd)
			if err != nil {
				return err
			}
			if args[0] != mcpserver.HistoryTool {
				return usagef("cast mcp call serves only the read-only %q tool", mcpserver.HistoryTool)
			}
			var in json.RawMessage
			if len(args) == 2 {
				in = json.RawMessage(args[1])
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			text, err := mcpserver.Call(cmd.Context(), c, mcpserver.Config{SessionID: id, Version: "dev", Tools: []string{mcpserver.HistoryTool}}, args[0], in)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
}
