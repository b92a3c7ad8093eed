package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

func (a *app) nodeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Manage one node (`cast nodes` lists them)"}
	cmd.AddCommand(a.nodeRmCmd())
	cmd.AddCommand(a.nodeJoinCmds()...)
	return cmd
}

func (a *app) nodeRmCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm NAME [--force]",
		Short: "Forget a node that is gone (refused while it is connected or owns sessions, unless --force)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !ids.ValidName(args[0]) {
				return usagef("node %q is not a valid node name; `cast nodes` lists them", args[0])
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Nodes.DeleteNode(ctx, &castv1.DeleteNodeRequest{Name: args[0], Force: force})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"name": args[0], "sessions": resp.Sessions})
				}
				fmt.Fprintf(a.out, "forgot node %s\n", args[0])
				if resp.Sessions > 0 {
					fmt.Fprintf(a.out, "%d session(s) it owned stay under its name; `cast drain %s --skip-worktree` moves them\n", resp.Sessions, args[0])
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "forget it even though it still owns sessions (they stay, for a later drain)")
	return cmd
}
