package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

func (a *app) nodeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Manage nodes (`cast node ls` lists them)"}
	cmd.AddCommand(a.nodesCmd("ls"), a.nodeRmCmd())
	cmd.AddCommand(a.nodeLabelCmd())
	cmd.AddCommand(a.nodeJoinCmds()...)
	return cmd
}

func (a *app) nodeRmCmd() *cobra.Command {
	var force bool
	cmd := onNode(&cobra.Command{
		Use:   "rm NAME [--force]",
		Short: "Forget a node that is gone (refused while it is connected or owns sessions, unless --force)",
	}, func(cmd *cobra.Command, name string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Nodes.DeleteNode(ctx, &castv1.DeleteNodeRequest{Name: name, Force: force})
			return a.replyAs(err, func() any {
				return map[string]any{"name": name, "sessions": resp.Sessions}
			}, func() error {
				fmt.Fprintf(a.out, "forgot node %s\n", name)
				if resp.Sessions > 0 {
					fmt.Fprintf(a.out, "%d session(s) it owned stay under its name\n", resp.Sessions)
					fmt.Fprintf(a.errOut, "`cast drain %s --skip-worktree` moves them\n", name)
				}
				return nil
			})
		})
	})
	cmd.Flags().BoolVar(&force, "force", false, "forget it even though it still owns sessions (they stay, for a later drain)")
	return cmd
}

func (a *app) nodeLabelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "label NODE KEY=VALUE... | KEY-...",
		Short: "Set (KEY=VALUE) or remove (KEY-) a node's admin labels; cast.dev/custodian=true lets it hold fleet logins (admins only)",
		Example: "  cast node label build1 cast.dev/custodian=true\n" +
			"  cast node label laptop cast.dev/custodian-",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := labelRequest(args[0], args[1:])
			if err != nil {
				return err
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Nodes.LabelNode(ctx, req)
				return a.replyAs(err, func() any {
					return map[string]any{"name": req.Name, "labels": resp.Labels}
				}, func() error {
					if len(resp.Labels) == 0 {
						fmt.Fprintf(a.out, "node %s has no admin labels\n", req.Name)
						return nil
					}
					fmt.Fprintf(a.out, "node %s: %s\n", req.Name, labelsOf(&castv1.Node{AdminLabels: resp.Labels}))
					return nil
				})
			})
		},
	}
}

// onNode makes cmd act on the one node its argument names (as onSession
// does for a session): its Args, and a RunE that refuses a name no node
// can have before anything is sent, then calls run with it.
func onNode(cmd *cobra.Command, run func(cmd *cobra.Command, node string) error) *cobra.Command {
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkNodeName(args[0]); err != nil {
			return err
		}
		return run(cmd, args[0])
	}
	return cmd
}

// checkNodeName refuses a NODE argument that cannot name a node before
// anything is sent, saying what names look like (as a --node flag's
// mistake does, flagKinds) and where they are.
func checkNodeName(name string) error {
	if err := validate.Need(validate.Name, "node", name); err != nil {
		return usagef("%v; `cast node ls` lists them", err)
	}
	return nil
}

// labelRequest reads `cast node label`'s arguments, refusing a malformed
// one before anything is sent.
func labelRequest(node string, args []string) (*castv1.LabelNodeRequest, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	req := &castv1.LabelNodeRequest{Name: node, Set: map[string]string{}}
	for _, arg := range args {
		if k, ok := strings.CutSuffix(arg, "-"); ok && !strings.Contains(arg, "=") {
			req.Remove = append(req.Remove, k)
			continue
		}
		k, v, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, usagef("%q is neither KEY=VALUE (set) nor KEY- (remove)", arg)
		}
		req.Set[k] = v
	}
	for _, k := range append(slices.Collect(maps.Keys(req.Set)), req.Remove...) {
		if err := validate.Need(validate.LabelKey, "label", k); err != nil {
			return nil, usagef("%v", err)
		}
	}
	for _, v := range req.Set {
		if err := validate.Check(validate.Name, "label value", v); err != nil {
			return nil, usagef("%v", err)
		}
	}
	return req, nil
}
