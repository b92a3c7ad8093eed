package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// defaultWorktree is --worktree given without a branch: the control plane
// names it cast/<title-slug>--<last 6 of the id>.
const defaultWorktree = "\x00default"

func (a *app) workspaceCmd() *cobra.Command {
	grp := &cobra.Command{Use: "workspace", Short: "Move a thread to another folder on its node: its checkout, a repository under it, or a git worktree"}
	var f workspaceFlags
	set := onSession(&cobra.Command{
		Use:   "set ID (--root | --repo PATH | --worktree [BRANCH] [--base REF])",
		Short: "Move a live thread; its next turn starts a fresh native session in the new folder, with the whole history",
		Long: "Move a live thread to its checkout (--root), a repository under the checkout (--repo PATH, relative to it),\n" +
			"or a git worktree on BRANCH, made outside the checkout when it does not exist (from --base REF, default HEAD).\n" +
			"--worktree alone names the branch cast/<title-slug>--<last 6 of the session id>. The thread gets a notice;\n" +
			"its agent's next turn rebuilds the conversation in the new folder. Refused while a turn runs.",
	}, sessionUse{rest: 1, hint: "cast workspace set ID --root; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, args []string) error {
		req, err := f.request(cmd, id, args)
		if err != nil {
			return err
		}
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Sessions.SetWorkspace(ctx, req)
			return a.reply(resp.GetSession(), err, func() error {
				s := resp.Session
				fmt.Fprintf(a.out, "%s now works in %s%s\n", s.Id, s.Cwd, suffix(" on branch ", s.WorktreeBranch))
				return nil
			})
		})
	})

	set.Flags().BoolVar(&f.root, "root", false, "the thread's checkout")
	set.Flags().StringVar(&f.repo, "repo", "", "a git repository under the checkout (relative path)")
	set.Flags().StringVar(&f.branch, "worktree", "", "a git worktree on BRANCH (new or existing; alone: cast/<title-slug>--<id>)")
	set.Flags().Lookup("worktree").NoOptDefVal = defaultWorktree
	set.Flags().StringVar(&f.base, "base", "", "the branch, tag or commit a new worktree branch starts from (default HEAD)")
	grp.AddCommand(set)
	return grp
}

// workspaceFlags are workspace set's flags: which folder to move to.
type workspaceFlags struct {
	root               bool
	repo, branch, base string
}

// request is the move to ask for session id, refused before anything is
// sent unless exactly one folder is given and its names are valid.
func (f *workspaceFlags) request(cmd *cobra.Command, id string, args []string) (*castv1.SetWorkspaceRequest, error) {
	req := &castv1.SetWorkspaceRequest{SessionId: id}
	if err := worktreeArg(cmd, &f.branch, args); err != nil {
		return nil, err
	}
	n := 0
	if f.root {
		n++
		req.Target = &castv1.SetWorkspaceRequest_Root{Root: true}
	}
	if cmd.Flags().Changed("repo") {
		n++
		if err := validate.Need(validate.RepoPath, "--repo", f.repo); err != nil {
			return nil, usageError{err}
		}
		req.Target = &castv1.SetWorkspaceRequest_Repo{Repo: f.repo}
	}
	if cmd.Flags().Changed("worktree") {
		n++
		wt := &castv1.WorktreeTarget{Base: f.base}
		if f.branch != defaultWorktree {
			wt.Branch = f.branch
		}
		if err := validate.Check(validate.Branch, "--worktree", wt.Branch); err != nil {
			return nil, usageError{err}
		}
		if err := validate.Check(validate.Branch, "--base", f.base); err != nil {
			return nil, usageError{err}
		}
		req.Target = &castv1.SetWorkspaceRequest_Worktree{Worktree: wt}
	} else if f.base != "" {
		return nil, usagef("--base goes with --worktree")
	}
	if n != 1 {
		return nil, usagef("give exactly one of --root, --repo PATH or --worktree [BRANCH]")
	}
	return req, nil
}

func (a *app) worktreeCmd() *cobra.Command {
	grp := &cobra.Command{Use: "worktree", Short: "List and remove the git worktrees cast made"}
	grp.AddCommand(a.worktreeLsCmd(), a.worktreeRmCmd())
	return grp
}

func (a *app) worktreeLsCmd() *cobra.Command {
	var node string
	ls := listCmd(a, &cobra.Command{
		Use:   "ls [--node N] [-o json|yaml|wide|name] [--no-headers]",
		Short: "Every worktree cast made: branch, sessions in it, whether an agent runs there, local changes",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client) (listing[*castv1.Worktree], error) {
		resp, err := c.AllWorktrees(ctx, &castv1.ListWorktreesRequest{Node: node})
		if err != nil { // resp holds the pages before the error: no listing to warn about
			return listing[*castv1.Worktree]{}, err
		}
		for _, u := range resp.Unanswered {
			fmt.Fprintf(a.errOut, "cast: warning: no answer from node %s\n", u)
		}
		return listing[*castv1.Worktree]{key: "worktrees", items: resp.Worktrees,
			// [] when every node answered, as "worktrees" is: scripts
			// iterate it (jq '.unanswered[]' fails on null).
			extra:   map[string]any{"unanswered": append([]string{}, resp.Unanswered...)},
			empty:   noWorktrees(node, len(resp.Unanswered) > 0),
			name:    func(w *castv1.Worktree) string { return w.Path },
			columns: worktreeColumns()}, nil
	})
	ls.Flags().StringVar(&node, "node", "", "only this node (default: every connected node)")
	return ls
}

// noWorktrees is what `cast worktree ls` says for people when it lists
// none: on node, when one was named; of the nodes that answered, when
// some did not (their worktrees are not known to be none).
func noWorktrees(node string, unanswered bool) string {
	where := ""
	switch {
	case node != "":
		where = " on node " + node
	case unanswered:
		where = " on the nodes that answered"
	}
	return "no worktrees cast made" + where + "; `cast new --agent A --worktree BRANCH` or `cast fork ID --worktree` makes one"
}

func worktreeColumns() []column[*castv1.Worktree] {
	return []column[*castv1.Worktree]{
		{header: "NODE", cell: func(w *castv1.Worktree) string { return w.Node }},
		{header: "PATH", cell: func(w *castv1.Worktree) string { return w.Path }},
		{header: "BRANCH", cell: func(w *castv1.Worktree) string { return w.Branch }},
		{header: "CHECKOUT", wide: true, cell: func(w *castv1.Worktree) string { return orDash(w.Checkout) }},
		{header: "SESSIONS", cell: func(w *castv1.Worktree) string { return orDash(strings.Join(w.Sessions, ",")) }},
		{header: "AGENT", cell: func(w *castv1.Worktree) string {
			if w.AgentRunning {
				return "running"
			}
			return "-"
		}},
		{header: "CHANGES", cell: func(w *castv1.Worktree) string {
			if w.Changes < 0 {
				return "?"
			}
			return fmt.Sprint(w.Changes)
		}},
	}
}

func (a *app) worktreeRmCmd() *cobra.Command {
	var force bool
	var node string
	rm := &cobra.Command{
		Use:   "rm PATH [--force] [--node N]",
		Short: "Remove a worktree cast made (never its branch); its threads move back to their checkout",
		Long: "Remove a worktree `cast worktree ls` shows. Refused while an agent runs there, and with local changes unless\n" +
			"--force (which discards them). The branch and its commits always stay. Threads in it move back to their\n" +
			"checkout, with a notice.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validate.Need(validate.Cwd, "PATH", args[0]); err != nil {
				return usageError{fmt.Errorf("%w (`cast worktree ls` shows the paths)", err)}
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Nodes.RemoveWorktree(ctx, &castv1.RemoveWorktreeRequest{Node: node, Path: args[0], Force: force})
				return a.reply(resp, err, func() error {
					w := resp.Worktree
					fmt.Fprintf(a.out, "removed %s; branch %s keeps its commits\n", w.GetPath(), w.GetBranch())
					for _, id := range resp.MovedSessions {
						fmt.Fprintf(a.out, "%s moved back to %s\n", id, w.GetCheckout())
					}
					return nil
				})
			})
		},
	}
	rm.Flags().BoolVar(&force, "force", false, "remove it with its local changes (the branch and its commits stay)")
	rm.Flags().StringVar(&node, "node", "", "the worktree's node (needed when several are connected)")
	return rm
}
