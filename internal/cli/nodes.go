package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/listfilter"
)

// nodesCmd is `cast node ls` (use "ls") and its older spelling `cast
// nodes`, kept for scripts: one command, the same output.
func (a *app) nodesCmd(use string) *cobra.Command {
	var out listFlags
	var probe bool
	var label, connected string
	short := "List nodes and whether they are connected"
	if use == "nodes" {
		short += " (as `cast node ls`)"
	}
	cmd := &cobra.Command{
		Use:   use + " [--label L] [--connected true|false] [-o json|yaml|wide|name] [--no-headers]",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if connected != "" && connected != "true" && connected != "false" {
				return usagef("--connected is true or false, not %q", connected)
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				// The control plane filters (docs/reference.md, Filters).
				nodes, err := c.AllNodes(ctx, &castv1.ListNodesRequest{Filter: listfilter.Equal("label", label, "connected", connected)})
				if err != nil {
					return err
				}
				empty := "no nodes yet; start one with `node --controlplane " + a.addr + "`"
				if label != "" || connected != "" {
					empty = "no nodes match; `cast node ls` without filters lists them all"
				}
				var failed error
				if probe {
					failed = a.probeNodes(cmd.Context(), c, nodes)
				}
				if err := printList(a, out, listing[*castv1.Node]{key: "nodes", items: nodes,
					empty:   empty,
					name:    func(n *castv1.Node) string { return n.Name },
					columns: nodeColumns(),
					after:   func() error { return a.printAgents(nodes) }}); err != nil {
					return err
				}
				return failed
			})
		},
	}
	out.bind(cmd, a)
	cmd.Flags().BoolVar(&probe, "probe", false, "first ask each connected node to probe its agents now (one tiny prompt per CLI, as node --probe does at start); READY then says whether each CLI answered")
	cmd.Flags().StringVar(&label, "label", "", "only nodes carrying this label (a node's own, e.g. linux)")
	cmd.Flags().StringVar(&connected, "connected", "", "only nodes connected now (true) or not (false)")
	_ = cmd.RegisterFlagCompletionFunc("label", a.completeAny(a.nodeLabels))
	_ = cmd.RegisterFlagCompletionFunc("connected", cobra.FixedCompletions([]string{"true", "false"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func nodeColumns() []column[*castv1.Node] {
	return []column[*castv1.Node]{
		{header: "NAME", cell: func(n *castv1.Node) string { return n.Name }},
		{header: "STATUS", cell: func(n *castv1.Node) string {
			if n.Connected {
				return "up"
			}
			return "down"
		}},
		{header: "OS", wide: true, cell: func(n *castv1.Node) string { return orDash(n.Os) }},
		{header: "HOSTNAME", wide: true, cell: func(n *castv1.Node) string { return orDash(n.Hostname) }},
		{header: "LABELS", cell: func(n *castv1.Node) string { return orDash(labelsOf(n)) }},
		{header: "AGENTS", cell: func(n *castv1.Node) string {
			var agents []string
			for _, ag := range n.Agents {
				agents = append(agents, ag.Name)
			}
			return orDash(strings.Join(agents, ","))
		}},
		{header: "CONNECTED", wide: true, cell: func(n *castv1.Node) string { return ago(n.ConnectTime) }},
		{header: "LAST SEEN", cell: func(n *castv1.Node) string { return ago(n.LastSeenTime) }},
	}
}

// probeWait bounds `cast nodes --probe`: a node probes one CLI at a time,
// each for up to a minute, and the control plane waits for it 5 minutes.
const probeWait = 6 * time.Minute

// probeNodes asks every connected node to probe its agents (ProbeNode), at
// once, and puts what each found in its place in nodes. A node that could
// not probe is named on stderr, and the error says how many.
func (a *app) probeNodes(parent context.Context, c *client.Client, nodes []*castv1.Node) error {
	ctx, cancel := context.WithTimeout(parent, probeWait)
	defer cancel()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if !n.Connected {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Nodes.ProbeNode(ctx, &castv1.ProbeNodeRequest{Node: n.Name})
			if err != nil {
				errs[i] = err
				return
			}
			n.Agents = resp.Agents
		}()
	}
	wg.Wait()
	bad := 0
	for i, err := range errs {
		if err != nil {
			bad++
			fmt.Fprintf(a.errOut, "cast: node %s did not probe its agents: %s\n", nodes[i].Name, a.explain(err))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d node(s) did not probe their agents (above); their READY is from their files", bad)
	}
	return nil
}

// printAgents is the per-agent table: version and whether a login was
// found (as of the node's last look), with what to run when not; with
// node --probe whether the CLI itself answered ("probed: ...").
func (a *app) printAgents(nodes []*castv1.Node) error {
	tw := newTable(a.out)
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
