package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func (a *app) nodesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "List nodes and whether they are connected",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"nodes": raws(resp.Nodes)})
				}
				if len(resp.Nodes) == 0 {
					fmt.Fprintln(a.out, "no nodes yet; start one with `node --controlplane "+a.addr+"`")
					return nil
				}
				tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSTATUS\tLABELS\tAGENTS\tLAST SEEN")
				for _, n := range resp.Nodes {
					st := "down"
					if n.Connected {
						st = "up"
					}
					var agents []string
					for _, ag := range n.Agents {
						agents = append(agents, ag.Name)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, st, orDash(labelsOf(n)), orDash(strings.Join(agents, ",")), ago(n.LastSeenTime))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				return a.printAgents(resp.Nodes)
			})
		},
	}
}

// printAgents is the per-agent table: version and whether a login was
// found (as of the node's last look), with what to run when not; with
// node --probe whether the CLI itself answered ("probed: ...").
func (a *app) printAgents(nodes []*castv1.Node) error {
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	header := false
	for _, n := range nodes {
		for _, ag := range n.Agents {
			if !header {
				fmt.Fprintln(tw, "\nNODE\tAGENT\tVERSION\tREADY\tDETAIL")
				header = true
			}
			ready := "no"
			if ag.Ready {
				ready = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, ag.Name, orDash(ag.Version), ready, orDash(ag.Status))
		}
	}
	return tw.Flush()
}

// labelsOf is the node's own labels, then its admin labels as KEY=VALUE.
func labelsOf(n *castv1.Node) string {
	out := slices.Clone(n.Labels)
	for _, k := range slices.Sorted(maps.Keys(n.AdminLabels)) {
		out = append(out, k+"="+n.AdminLabels[k])
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
