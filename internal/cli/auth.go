package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// tokenCmd is `cast token`: admin and user bearer tokens (admin only).
func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Admin and user tokens for the API (admin only)"}
	cmd.AddCommand(a.tokenCreateCmd(), a.tokenLsCmd(), a.tokenRmCmd(), a.whoamiCmd())
	return cmd
}

var roleFlag = map[string]castv1.Role{"admin": castv1.Role_ROLE_ADMIN, "user": castv1.Role_ROLE_USER}

func (a *app) tokenCreateCmd() *cobra.Command {
	var role, name string
	cmd := &cobra.Command{
		Use:   "create --role user|admin --name NAME",
		Short: "Make a token; it is printed once and stored only as a hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, ok := roleFlag[role]
			if !ok || name == "" {
				return usagef("--role (user or admin) and --name are required")
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: name, Role: r})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"token": resp.Token, "principal": resp.Principal})
				}
				fmt.Fprintln(a.out, resp.Token)
				fmt.Fprintf(a.errOut, "token for %s; it is not shown again: give it to its owner (CAST_TOKEN, or `cast` contexts in ~/.config/cast/config.yaml)\n", resp.Principal)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "user (sees only its own sessions) or admin")
	cmd.Flags().StringVar(&name, "name", "", "unique name of the token's owner")
	return cmd
}

func (a *app) tokenLsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "ls", Short: "List tokens by name (never their values)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Auth.ListTokens(ctx, &castv1.ListTokensRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"tokens": raws(resp.Tokens)})
				}
				tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tROLE\tCREATED")
				for _, t := range resp.Tokens {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, roleName(t.Role), time.Unix(t.CreateTimeUnix, 0).UTC().Format(time.RFC3339))
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) tokenRmCmd() *cobra.Command {
	return &cobra.Command{
		Use: "rm NAME", Short: "Revoke a token at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				if _, err := c.Auth.DeleteToken(ctx, &castv1.DeleteTokenRequest{Name: args[0]}); err != nil {
					return err
				}
				fmt.Fprintf(a.out, "token %s revoked\n", args[0])
				return nil
			})
		},
	}
}

func (a *app) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use: "whoami", Short: "Name the principal your credential stands for", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"principal": resp.Principal, "role": roleName(resp.Role)})
				}
				fmt.Fprintln(a.out, resp.Principal)
				return nil
			})
		},
	}
}

// nodeJoinCmds are `cast node token create` and `cast node revoke`
// (admin only): joining nodes and revoking their credentials.
func (a *app) nodeJoinCmds() []*cobra.Command {
	tok := &cobra.Command{Use: "token", Short: "One-time join tokens for new nodes"}
	var ttl time.Duration
	var uses int
	create := &cobra.Command{
		Use:   "create [--ttl 1h] [--uses N]",
		Short: "Make a one-time join token: start a new node with `node --join-token TOKEN`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: int64(ttl / time.Second), Uses: int32(uses)})
				if err != nil {
					return err
				}
				exp := time.Unix(resp.ExpireTimeUnix, 0).UTC()
				if a.json {
					return a.printJSON(map[string]any{"token": resp.Token, "expire_time": exp.Format(time.RFC3339)})
				}
				fmt.Fprintln(a.out, resp.Token)
				fmt.Fprintf(a.errOut, "works %d time(s), until %s: node --controlplane %s --join-token TOKEN --name NAME\n", max(uses, 1), exp.Format(time.RFC3339), a.addr)
				return nil
			})
		},
	}
	create.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token works")
	create.Flags().IntVar(&uses, "uses", 1, "how many nodes may join with it (a StatefulSet's replicas)")
	tok.AddCommand(create)
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a node's credential at once; it must join again with a new join token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: args[0]})
				if err != nil {
					return err
				}
				if !resp.Revoked {
					fmt.Fprintf(a.out, "node %s had no credential\n", args[0])
					return nil
				}
				fmt.Fprintf(a.out, "node %s's credential revoked\n", args[0])
				return nil
			})
		},
	}
	return []*cobra.Command{tok, revoke}
}

// call runs fn with a client and the request deadline.
func (a *app) call(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(cmd.Context())
	defer cancel()
	return fn(ctx, c)
}

func roleName(r castv1.Role) string { return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_")) }
