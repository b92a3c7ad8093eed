package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/git"
	"github.com/cast-dev/cast/internal/listfilter"
)

// checkWorktreeCheckout refuses `--worktree` for a folder that is not a
// git checkout with a commit to branch from, before the session is stored
// (the node would only find out at its first turn). The folder is the
// caller's own (--cwd must exist here). Without git here, or when git
// fails otherwise, the node decides.
func checkWorktreeCheckout(ctx context.Context, dir string) error {
	repo, err := git.Open(ctx, dir, 0)
	switch {
	case git.IsKind(err, git.KindNotRepo):
		return usagef("--worktree needs a git checkout, and %s is not in one: run the command in a checkout (or give --cwd one), run `git init` and commit there first, or drop --worktree", dir)
	case err != nil:
		return nil
	}
	if _, err := git.Run(ctx, repo.Root, 0, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		return usagef("--worktree branches from the checkout's last commit, and %s has no commit yet: commit there first, or drop --worktree", repo.Root)
	}
	return nil
}

// importNoCLIHint says how to continue an imported session whose node has
// no CLI for its agent, or that it waits for a node when none was
// connected ("" when its node has the CLI, or the nodes cannot be read:
// the import itself succeeded either way).
func (a *app) importNoCLIHint(ctx context.Context, c *client.Client, sess *castv1.Session) string {
	if sess.Node == "" {
		return fmt.Sprintf("no node is connected: session %s is stored, and the first node to connect takes it (start one with `node --controlplane ADDR`)", sess.Id)
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{Filter: listfilter.Equal("name", sess.Node)})
	if err != nil {
		return ""
	}
	for _, n := range resp.Nodes {
		if n.Name != sess.Node {
			continue
		}
		var have []string
		for _, in := range n.Agents {
			if in.Name == sess.Agent {
				return ""
			}
			have = append(have, in.Name)
		}
		if len(have) == 0 {
			return fmt.Sprintf("node %s has no %s CLI; continue the session on an agent installed on a node (`cast switch %s --agent A`, `cast fork`, `cast handoff`)", n.Name, sess.Agent, sess.Id)
		}
		return fmt.Sprintf("node %s has no %s CLI; continue the session on one it has (%s): `cast switch %s --agent %s` (or `cast fork`, `cast handoff`)",
			n.Name, sess.Agent, strings.Join(have, ", "), sess.Id, have[0])
	}
	return ""
}
