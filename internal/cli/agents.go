package cli

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/capability"
	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/nodebin"
)

func (a *app) agentsCmd() *cobra.Command {
	cmd := objectsCmd(a, &cobra.Command{
		Use:   "agents [-o json|yaml|wide|name] [--no-headers]",
		Short: "Show the conformance matrix: which agent CLI versions passed which checks",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client) (listing[*matrixRow], any, error) {
		checks, err := c.AllAgentChecks(ctx, &castv1.ListAgentChecksRequest{})
		if err != nil {
			return listing[*matrixRow]{}, nil, err
		}
		nodes, err := c.AllNodes(ctx, &castv1.ListNodesRequest{})
		if err != nil {
			return listing[*matrixRow]{}, nil, err
		}
		rows := matrixRows(checks, nodes)
		// json and yaml are the checks themselves (the API objects);
		// the table pivots them to a row per agent version.
		return listing[*matrixRow]{key: "checks", items: rows,
			empty: "no agent checked yet; run `cast agents check` (nodes check theirs when they start)",
			// -o name is what --agent takes (cast ls, usage, agents
			// check): a row is an agent's version, so an agent checked
			// at two versions is named once (printObjects).
			name:    func(r *matrixRow) string { return r.agent },
			columns: matrixColumns(),
			after:   func() error { a.printFailures(rows); return nil }}, raws(checks), nil
	})
	cmd.AddCommand(a.agentsCheckCmd())
	return cmd
}

// matrixRow is one agent version: its verdict per capability and the
// nodes that have it installed.
type matrixRow struct {
	agent, version string
	verdicts       map[string]*castv1.AgentCheck
	nodes          []string
}

// matrixRows pivots the checks to a row per agent version, with the nodes
// that have that version installed, sorted by agent and version.
func matrixRows(checks []*castv1.AgentCheck, nodes []*castv1.Node) []*matrixRow {
	var rows []*matrixRow
	row := func(agent, version string) *matrixRow {
		for _, r := range rows {
			if r.agent == agent && r.version == version {
				return r
			}
		}
		r := &matrixRow{agent: agent, version: version, verdicts: map[string]*castv1.AgentCheck{}}
		rows = append(rows, r)
		return r
	}
	for _, c := range checks {
		row(c.Agent, c.Version).verdicts[c.Capability] = c
	}
	for _, n := range nodes {
		for _, in := range n.Agents {
			if capability.Checkable(in.Name) && in.Version != "" {
				r := row(in.Name, in.Version)
				r.nodes = append(r.nodes, n.Name)
			}
		}
	}
	slices.SortFunc(rows, func(x, y *matrixRow) int {
		return strings.Compare(x.agent+"\x00"+x.version, y.agent+"\x00"+y.version)
	})
	return rows
}

// matrixColumns: agent, version, a verdict per capability, then the nodes
// (and with -o wide, when each version was last checked and by whom).
func matrixColumns() []column[*matrixRow] {
	cols := []column[*matrixRow]{
		{header: "AGENT", cell: func(r *matrixRow) string { return r.agent }},
		{header: "VERSION", cell: func(r *matrixRow) string { return r.version }},
	}
	for _, cp := range capability.All {
		cols = append(cols, column[*matrixRow]{header: strings.ToUpper(cp), cell: func(r *matrixRow) string {
			switch v, ok := r.verdicts[cp]; {
			case !ok:
				return "-"
			case v.Passed:
				return "ok"
			}
			return "FAILED"
		}})
	}
	return append(cols,
		column[*matrixRow]{header: "NODES", cell: func(r *matrixRow) string { return orDash(strings.Join(r.nodes, ",")) }},
		column[*matrixRow]{header: "CHECKED BY", wide: true, cell: func(r *matrixRow) string { return orDash(lastCheck(r).GetCheckedBy()) }},
		column[*matrixRow]{header: "CHECKED", wide: true, cell: func(r *matrixRow) string {
			if c := lastCheck(r); c != nil {
				return ago(c.CheckTime)
			}
			return "-"
		}})
}

// lastCheck is the row's most recent verdict (nil: none recorded).
func lastCheck(r *matrixRow) *castv1.AgentCheck {
	var last *castv1.AgentCheck
	for _, c := range r.verdicts {
		if last == nil || c.GetCheckTime().AsTime().After(last.GetCheckTime().AsTime()) {
			last = c
		}
	}
	return last
}

// printFailures says, under the table, why each failed check failed.
func (a *app) printFailures(rows []*matrixRow) {
	var failures []string
	for _, r := range rows {
		for _, cp := range capability.All {
			if v, ok := r.verdicts[cp]; ok && !v.Passed {
				failures = append(failures, fmt.Sprintf("%s %s %s: %s (checked by %s %s)", r.agent, r.version, cp, v.Detail, v.CheckedBy, ago(v.CheckTime)))
			}
		}
	}
	if len(failures) > 0 {
		fmt.Fprintln(a.out, "\nA switch or fork into a failed version becomes a handoff.")
		for _, f := range failures {
			fmt.Fprintln(a.out, "  "+a.forScreen(f))
		}
	}
}

func (a *app) agentsCheckCmd() *cobra.Command {
	var only string
	cmd := &cobra.Command{
		Use:   "check [--agent A]",
		Short: "Run the installed agent CLIs through write, resume, append, read back and fork against a local fake model; record the verdicts",
		Long: "Runs each installed agent CLI (on PATH) through cast's conformance canary, here, in a throwaway HOME\n" +
			"against a fake model on loopback, and records the verdicts per CLI version (an admin token records;\n" +
			"any token runs them). The canary runs in cast's node binary, the one beside cast (or cast's node on\n" +
			"PATH): the CLI itself links no agent runner.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, err := checkNames(only)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			results, err := a.runChecks(cmd.Context(), names, only != "")
			if err != nil {
				return err
			}
			// The verdicts are shown even when recording them fails (a
			// user token may run the checks but not record them).
			recorded, recErr := a.recordChecks(cmd, c.Agents, results)
			if a.json {
				if err := a.printJSON(map[string]any{"results": results, "recorded": raws(recorded)}); err != nil {
					return err
				}
			} else {
				a.printCheckResults(results)
			}
			if recErr != nil {
				return recErr
			}
			if n := countFailed(results); n > 0 {
				return fmt.Errorf("%d checks failed; a switch or fork into those versions becomes a handoff", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&only, "agent", "", "check only this agent")
	return cmd
}

// checkNames is the agents to check: every one with a conformance check,
// or only (refused when it has none).
func checkNames(only string) ([]string, error) {
	names := capability.Agents()
	if only == "" {
		return names, nil
	}
	if !capability.Checkable(only) {
		return nil, usagef("--agent %q has no conformance check; use one of %s", only, strings.Join(names, ", "))
	}
	return []string{only}, nil
}

// runChecks runs the canary on each of names installed here. An agent not
// installed is skipped, unless it is the one asked for (only). The node
// binary is looked for once, and only when there is a CLI to check.
func (a *app) runChecks(ctx context.Context, names []string, only bool) ([]capability.Result, error) {
	results := []capability.Result{} // --json: [] when none ran
	nodeBin := ""
	for _, name := range names {
		ag, _ := agents.Lookup(name)
		bin, err := exec.LookPath(ag.Binary)
		if err != nil {
			if only {
				return nil, fmt.Errorf("%s is not installed here (%s is not on PATH)", name, ag.Binary)
			}
			fmt.Fprintf(a.errOut, "%s: not installed here, skipped\n", name)
			continue
		}
		fmt.Fprintf(a.errOut, "checking %s (%s)…\n", name, bin)
		if nodeBin == "" {
			if nodeBin, err = a.nodeBinary(ctx, "cast agents check"); err != nil {
				return nil, err
			}
		}
		res, err := nodebin.CheckAgent(ctx, nodeBin, name, bin, a.errOut)
		if err != nil {
			return nil, err
		}
		results = append(results, res)
	}
	return results, nil
}

// recordChecks sends every verdict of a known version to the control plane.
func (a *app) recordChecks(cmd *cobra.Command, c castv1.AgentServiceClient, results []capability.Result) ([]*castv1.AgentCheck, error) {
	var checks []*castv1.AgentCheck
	for _, r := range results {
		if r.Version == "" {
			fmt.Fprintf(a.errOut, "%s: version unknown (%s is not an npm package or versioned install); verdicts not recorded\n", r.Agent, r.Bin)
			continue
		}
		checks = append(checks, capability.Verdicts(r)...)
	}
	if len(checks) == 0 {
		return nil, nil
	}
	ctx, cancel := a.ctx(cmd.Context())
	defer cancel()
	resp, err := c.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Checks: checks})
	if err != nil {
		return nil, fmt.Errorf("the verdicts were not recorded (recording needs an admin token): %w", err)
	}
	return resp.Checks, nil
}

func (a *app) printCheckResults(results []capability.Result) {
	tw := newTable(a.out)
	fmt.Fprintln(tw, "AGENT\tVERSION\tCAPABILITY\tVERDICT")
	for _, r := range results {
		for _, ch := range r.Checks {
			v := "ok"
			if !ch.Passed {
				v = "FAILED: " + a.forScreen(ch.Detail)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Agent, orDash(r.Version), ch.Capability, v)
		}
	}
	_ = tw.Flush()
}

func countFailed(results []capability.Result) int {
	n := 0
	for _, r := range results {
		n += len(r.Failed())
	}
	return n
}
