package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/placement"
	"github.com/cast-dev/cast/internal/runner"
)

// execDryRun prints the command the node that would take the turn runs:
// its CLI path and the HOME and agent folder it advertises (so a
// `--session` path is where that node keeps it). With no control plane,
// or no node with the agent, it says so and shows placeholder paths.
func (a *app) execDryRun(ctx context.Context, o execOpts, prompts []string) error {
	node, inst, why := a.dryRunNode(ctx, o.agent)
	if why != "" {
		fmt.Fprintf(a.errOut, "cast: %s; the paths below are placeholders\n", why)
	}
	r := &runner.Runner{}
	for _, p := range prompts {
		t := runner.Turn{Agent: o.agent, Model: o.model, Cwd: o.cwd, Prompt: p,
			Home: filepath.Join(os.TempDir(), "cast-node", "agents", o.agent)}
		if inst != nil {
			t = t.On(inst.Home, inst.AgentDir)
		}
		c, err := r.CommandLine(t)
		if err != nil {
			return err
		}
		if inst != nil && inst.Path != "" {
			c.Argv[0] = inst.Path // the node's CLI, which this machine may not have
		}
		if err := a.printDryRun(node, o, c); err != nil {
			return err
		}
	}
	return nil
}

// dryRunNode is the node a one-shot turn of agent would go to and its
// install of agent; why says what is missing when there is none.
func (a *app) dryRunNode(parent context.Context, agent string) (string, *castv1.AgentInstall, string) {
	c, err := a.client()
	if err != nil {
		return "", nil, "no control plane to ask which node would run it (" + err.Error() + ")"
	}
	ctx, cancel := context.WithTimeout(parent, min(a.timeout, 10*time.Second))
	defer cancel()
	resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
	if err != nil {
		return "", nil, "could not ask the control plane which node would run it (" + a.explain(err) + ")"
	}
	name, err := placement.Likely(resp.Nodes, a.cc.Node, agent) // this machine's node first, as cast exec places it
	if err != nil {
		return "", nil, err.Error()
	}
	for _, n := range resp.Nodes {
		if n.Name != name {
			continue
		}
		for _, in := range n.Agents {
			if in.Name == agent {
				return name, in, ""
			}
		}
	}
	return "", nil, "node " + name + " does not list " + agent
}

func (a *app) printDryRun(node string, o execOpts, c runner.Command) error {
	if a.json {
		out := map[string]any{"agent": o.agent, "argv": c.Argv, "cwd": o.cwd}
		if node != "" {
			out["node"] = node
		}
		if c.PromptOnStdin {
			out["stdin"] = c.Stdin
		}
		if c.Note != "" {
			out["note"] = c.Note
		}
		return a.printJSON(out)
	}
	if c.Note != "" {
		fmt.Fprintln(a.out, "# "+c.Note)
	}
	line := shellJoin(c.Argv)
	if c.PromptOnStdin {
		// The prompt is never in argv: the node writes it to the CLI's stdin.
		line = "printf %s " + shellJoin([]string{c.Stdin}) + " | " + line
	}
	fmt.Fprintln(a.out, line)
	return nil
}
