package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/listfilter"
	"github.com/cast-dev/cast/internal/nodebin"
)

// execDryRun prints the command the node that would take the turn runs:
// its CLI path, the HOME and agent folder it advertises (so a `--session`
// path is where that node keeps it) and its path for the folder (after its
// --map-path). The control plane places it as exec would and stores
// nothing. With no control plane, or no node that would take it, it says
// so and shows placeholder paths. The line is the runner's, from cast's
// node binary (nodebin.CommandLine): the CLI links no runner.
func (a *app) execDryRun(ctx context.Context, o execOpts, prompts []string) error {
	node, cwd, inst, why := a.dryRunPlace(ctx, o, prompts[0])
	if why != "" {
		fmt.Fprintf(a.errOut, "cast: %s; the paths below are placeholders\n", why)
	}
	o.cwd = cwd
	nodeBin, err := a.nodeBinary(ctx, "cast exec --dry-run")
	if err != nil {
		return err
	}
	for _, p := range prompts {
		req := nodebin.LineRequest{Agent: o.agent, Model: o.model, Cwd: o.cwd, Prompt: p,
			Home: filepath.Join(os.TempDir(), "cast-node", "agents", o.agent)}
		if inst != nil {
			req.NodeHome, req.NodeAgentDir = inst.Home, inst.AgentDir
		}
		c, err := nodebin.CommandLine(ctx, nodeBin, req, a.errOut)
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

// dryRunPlace asks the control plane where a one-shot turn of o.agent
// would go (CreateSession with validate_only: placed as exec places it,
// nothing stored) and that node's install of the agent; why says what is
// missing when there is none, and cwd is then the caller's folder.
func (a *app) dryRunPlace(parent context.Context, o execOpts, prompt string) (node, cwd string, inst *castv1.AgentInstall, why string) {
	c, err := a.client()
	if err != nil {
		return "", o.cwd, nil, "no control plane to ask which node would run it (" + err.Error() + ")"
	}
	ctx, cancel := context.WithTimeout(parent, min(a.timeout, 10*time.Second))
	defer cancel()
	req := &castv1.CreateSessionRequest{Agent: o.agent, Model: o.model, Cwd: o.cwd, Hidden: true, Text: prompt, ValidateOnly: true}
	a.fromHere(req)
	placed, err := c.Sessions.CreateSession(ctx, req)
	if err != nil {
		return "", o.cwd, nil, "no node would run it (" + a.explain(err) + ")"
	}
	resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{Filter: listfilter.Equal("name", placed.Node)})
	if err != nil {
		return "", o.cwd, nil, "could not ask the control plane for node " + placed.Node + "'s " + o.agent + " (" + a.explain(err) + ")"
	}
	for _, n := range resp.Nodes {
		if n.Name != placed.Node {
			continue
		}
		for _, in := range n.Agents {
			if in.Name == o.agent {
				return placed.Node, placed.Cwd, in, ""
			}
		}
	}
	return "", o.cwd, nil, "node " + placed.Node + " does not list " + o.agent
}

func (a *app) printDryRun(node string, o execOpts, c nodebin.Line) error {
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
