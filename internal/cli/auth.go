package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/validate"
)

// tokenCmd is `cast token`: admin and user bearer tokens (admin only).
func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Admin and user tokens for the API (admin only)"}
	cmd.AddCommand(a.tokenCreateCmd(), a.tokenLsCmd(), a.tokenRmCmd(), a.whoamiCmd(), a.tokenCertCmd())
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
				return a.replyAs(err, func() any {
					return map[string]any{"token": resp.Token, "principal": resp.Principal}
				}, func() error {
					fmt.Fprintln(a.out, resp.Token)
					fmt.Fprintf(a.errOut, "token for %s; it is not shown again: give it to its owner (CAST_TOKEN, or `cast` contexts in ~/.config/cast/config.yaml)\n", resp.Principal)
					return nil
				})
			})
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "user (sees only its own sessions) or admin")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(slices.Sorted(maps.Keys(roleFlag)), cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().StringVar(&name, "name", "", "unique name of the token's owner")
	return cmd
}

func (a *app) tokenLsCmd() *cobra.Command {
	return listCmd(a, &cobra.Command{
		Use: "ls [-o json|yaml|wide|name] [--no-headers]", Short: "List tokens by name (never their values)", Args: cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client) (listing[*castv1.TokenInfo], error) {
		tokens, err := c.AllTokens(ctx, &castv1.ListTokensRequest{})
		return listing[*castv1.TokenInfo]{key: "tokens", items: tokens,
			name: func(t *castv1.TokenInfo) string { return t.Name },
			columns: []column[*castv1.TokenInfo]{
				{header: "NAME", cell: func(t *castv1.TokenInfo) string { return t.Name }},
				{header: "ROLE", cell: func(t *castv1.TokenInfo) string { return roleName(t.Role) }},
				{header: "CREATED", cell: func(t *castv1.TokenInfo) string { return stamp(t.CreateTime) }},
				{header: "AGE", wide: true, cell: func(t *castv1.TokenInfo) string { return ago(t.CreateTime) }},
			}}, err
	})
}

func (a *app) tokenRmCmd() *cobra.Command {
	return a.calling(&cobra.Command{
		Use: "rm NAME", Short: "Revoke a token at once", Args: idArgs(cobra.ExactArgs(1), validate.Name, "token name"),
	}, func(ctx context.Context, c *client.Client, args []string) error {
		if _, err := c.Auth.DeleteToken(ctx, &castv1.DeleteTokenRequest{Name: args[0]}); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "token %s revoked\n", args[0])
		return nil
	})
}

func (a *app) whoamiCmd() *cobra.Command {
	return a.calling(&cobra.Command{
		Use: "whoami", Short: "Name the principal your credential stands for", Args: cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		resp, err := c.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
		return a.replyAs(err, func() any {
			return map[string]any{"principal": resp.Principal, "role": roleName(resp.Role)}
		}, func() error {
			fmt.Fprintln(a.out, resp.Principal)
			return nil
		})
	})
}

// nodeJoinCmds are `cast node token create` and `cast node revoke`
// (admin only): joining nodes and revoking their credentials.
func (a *app) nodeJoinCmds() []*cobra.Command {
	tok := &cobra.Command{Use: "token", Short: "One-time join tokens for new nodes"}
	var ttl time.Duration
	var uses int
	create := a.calling(&cobra.Command{
		Use:   "create [--ttl 1h] [--uses N]",
		Short: "Make a one-time join token: start a new node with `node --join-token TOKEN`",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		resp, err := c.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: int64(ttl / time.Second), Uses: int32(uses)})
		exp := resp.GetExpireTime().AsTime().UTC().Format(time.RFC3339) // printed only when err is nil
		return a.replyAs(err, func() any {
			return map[string]any{"token": resp.Token, "expire_time": exp}
		}, func() error {
			fmt.Fprintln(a.out, resp.Token)
			pin := ""
			if p := a.caPin(ctx); p != "" {
				pin = " --ca-pin " + p
			}
			fmt.Fprintf(a.errOut, "works %d time(s), until %s: node --controlplane %s%s --join-token TOKEN --name NAME\n", max(uses, 1), exp, a.addr, pin)
			return nil
		})
	})
	create.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token works")
	create.Flags().IntVar(&uses, "uses", 1, "how many nodes may join with it (a StatefulSet's replicas)")
	tok.AddCommand(create)
	revoke := onNode(&cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a node's credential at once; it must join again with a new join token",
	}, func(cmd *cobra.Command, node string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: node})
			if err != nil {
				return err
			}
			if !resp.Revoked {
				fmt.Fprintf(a.out, "node %s had no credential\n", node)
				return nil
			}
			fmt.Fprintf(a.out, "node %s's credential revoked\n", node)
			return nil
		})
	})
	return []*cobra.Command{tok, revoke, a.nodeJoinCmd()}
}

// nodeJoinCmd joins a node on this machine ahead of its first start: the
// key is made here and never leaves the node's data dir.
func (a *app) nodeJoinCmd() *cobra.Command {
	var j nodeJoin
	cmd := &cobra.Command{
		Use:   "join --join-token TOKEN --ca-pin sha256:... [--name NAME] [--data-dir DIR]",
		Short: "Join a node on this machine: make its key and get its client certificate (then start `node --ca-pin ...`)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := j.check(); err != nil {
				return err
			}
			cc, err := a.resolve()
			if err != nil {
				return err
			}
			a.use(cc)
			id, err := a.joinNode(cmd.Context(), cc.Addr, j)
			if err != nil {
				return err
			}
			// This machine's sessions go to the node joined on it.
			ctxName, err := client.RecordNode(os.Getenv, a.context, cc.Addr, j.pin, j.name)
			if err != nil {
				return fmt.Errorf("node %s joined, but this machine's cast context was not written: %w", j.name, err)
			}
			return a.printJoined(j, id, cc.Addr, ctxName)
		},
	}
	f := cmd.Flags()
	f.StringVar(&j.joinToken, "join-token", os.Getenv("CAST_JOIN_TOKEN"), "one-time join token (cast node token create; env CAST_JOIN_TOKEN)")
	f.StringVar(&j.pin, "ca-pin", os.Getenv("CAST_CA_PIN"), "the control plane CA's pin, sha256:... (controlplane logs it; env CAST_CA_PIN)")
	f.StringVar(&j.name, "name", "", "the node's name (default: hostname)")
	f.StringVar(&j.dataDir, "data-dir", "", "the node's data dir (default: node's own default)")
	return cmd
}

// nodeJoin is node join's flags.
type nodeJoin struct {
	joinToken, pin, name, dataDir string
}

// check refuses a join without its token and pin or with a bad name, and
// fills in the default name and data dir.
func (j *nodeJoin) check() error {
	if j.joinToken == "" || j.pin == "" {
		return usagef("give --join-token (cast node token create) and --ca-pin (the control plane logs it)")
	}
	if j.name == "" {
		j.name, _ = os.Hostname()
	}
	if !ids.ValidName(j.name) {
		return usagef("node name %q is not valid; give --name", j.name)
	}
	if j.dataDir == "" {
		j.dataDir = client.DefaultNodeDataDir(os.Getenv)
	}
	return nil
}

// joinNode trades the join token at the control plane at addr, trusted by
// its pin, for the node's certificate and CA bundle, kept in its data dir.
func (a *app) joinNode(parent context.Context, addr string, j nodeJoin) (*client.Identity, error) {
	tlsCfg, err := client.Context{CAPin: j.pin}.TLS()
	if err != nil {
		return nil, usagef("--ca-pin: %v", err)
	}
	c, err := client.DialOpts(addr, client.Options{TLS: tlsCfg})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id, err := client.LoadIdentity(filepath.Join(j.dataDir, client.NodeIdentityFile))
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.ctx(parent)
	defer cancel()
	if err := id.Renew(ctx, j.name, c.JoinSigner(j.name, j.joinToken)); err != nil {
		return nil, err
	}
	// The node trusts this bundle from its first start on (a CA
	// rotation changes it; the pin is for the first contact only).
	keep := &client.BundleSync{Have: func() string { return "" }, Keep: func(b []byte) error {
		return client.SaveBundle(filepath.Join(j.dataDir, client.NodeBundleFile), b, 0o600)
	}}
	if err := c.FetchBundle(ctx, keep); err != nil {
		return nil, err
	}
	return id, nil
}

// printJoined tells where the node's key and certificate are and how to
// start it.
func (a *app) printJoined(j nodeJoin, id *client.Identity, addr, ctxName string) error {
	exp := id.Cert().Leaf.NotAfter.UTC().Format(time.RFC3339)
	if a.json {
		return a.printJSON(map[string]any{"name": j.name, "identity": id.Path(), "expire_time": exp, "context": ctxName})
	}
	fmt.Fprintf(a.out, "node %s joined; its key and certificate are in %s (renewed by the node before %s)\n", j.name, id.Path(), exp)
	fmt.Fprintf(a.errOut, "start it: node --controlplane %s --ca-pin %s --name %s --data-dir %s\n", addr, j.pin, j.name, j.dataDir)
	a.saidNode(ctxName, addr, j.name)
	return nil
}

// saidNode tells where sessions made on this machine now go, or how to
// send them to the node joined here when no context for its control plane
// is in use.
func (a *app) saidNode(ctxName, addr, node string) {
	path := configPath()
	if ctxName == "" {
		fmt.Fprintf(a.errOut, "to send sessions made on this machine to node %s, add `node: %s` to your context for %s in %s\n", node, node, addr, path)
		return
	}
	fmt.Fprintf(a.errOut, "sessions made on this machine without --node go to node %s (context %s in %s)\n", node, ctxName, path)
}

func roleName(r castv1.Role) string { return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_")) }

// caPin is the pin of the CA that signs the control plane's certificate,
// as the CLI verifies it ("" without TLS or when it cannot tell), for the
// node command lines it suggests: a CA file may hold two CAs during a
// rotation, and only the signing one's pin lets a new node in.
func (a *app) caPin(ctx context.Context) string {
	cc, err := a.resolve()
	if err != nil || cc.CAPin != "" || cc.CA == "" {
		return cc.CAPin
	}
	b, err := os.ReadFile(cc.CA)
	if err != nil {
		return ""
	}
	caPEM, err := a.fetchCA(ctx, cc.Addr, func(ctx context.Context, addr string) ([]byte, error) {
		return pki.FetchSigningCA(ctx, addr, b)
	})
	if err != nil {
		return ""
	}
	cert, err := pki.ParseCert(caPEM)
	if err != nil {
		return ""
	}
	return pki.Pin(cert)
}
