package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
	"github.com/cast-dev/cast/internal/wire"
)

// accountCmd is `cast account`: fleet accounts, the credential snapshots
// the control plane switches between when a session hits a usage limit.
func (a *app) accountCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "account",
		Short: "Fleet accounts: credentials every node's shared store is switched between on usage limits",
	}
	cmd.AddCommand(a.accountAddCmd(), a.accountLsCmd(), a.accountRmCmd(), a.accountUseCmd(), a.accountPolicyCmd(),
		a.accountAnswerCmd(true), a.accountAnswerCmd(false))
	return cmd
}

func (a *app) accountAddCmd() *cobra.Command {
	var agent, file, home string
	var release bool
	cmd := &cobra.Command{
		Use:   "add NAME --agent " + strings.Join(agents.FleetAgents(), "|") + " (--credentials FILE|- | --from-home DIR [--release-home])",
		Short: "Store an account's credential (sealed at rest), from a file or an agent's current login; the agent's first account becomes active",
		Args:  idArgs(cobra.ExactArgs(1), validate.Name, "account name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" || (file == "") == (home == "") {
				return usagef("--agent and one of --credentials or --from-home are required (%s; - reads stdin)", credentialHints())
			}
			if release && home == "" {
				return usagef("--release-home needs --from-home")
			}
			var cred []byte
			var hl *homeLogin
			var err error
			if home != "" {
				if hl, err = loginFromHome(agent, home); err != nil {
					return err
				}
				cred = hl.cred
			} else if cred, err = readCredential(a.in, file); err != nil {
				return flagFile("--credentials", file, err)
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				acc, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: args[0], Agent: agent, Credential: cred})
				if err != nil {
					return err
				}
				a.warnNoFleetNode(ctx, c, agent)
				if hl == nil {
					return a.printAccount(acc, "stored")
				}
				return a.printHomeAccount(acc, hl, release)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent whose credential store it fills: "+strings.Join(agents.FleetAgents(), ", "))
	cmd.Flags().StringVar(&file, "credentials", "", "credential file to store (- reads stdin)")
	cmd.Flags().StringVar(&home, "from-home", "", "take the agent's current login from its config folder (CLAUDE_CONFIG_DIR or CODEX_HOME layout); custody moves to cast")
	cmd.Flags().BoolVar(&release, "release-home", false, "with --from-home: rewrite the folder's login without its refresh token so it stops refreshing on its own")
	return cmd
}

// warnNoFleetNode says on stderr when no connected node writes agent's
// fleet logins (AgentInstall.fleet_logins): the account is stored, but
// every node keeps its user's own login, and only the control plane's log
// said so. A failed listing says nothing: the account is stored all the
// same.
func (a *app) warnNoFleetNode(ctx context.Context, c *client.Client, agent string) {
	nodes, err := c.AllNodes(ctx, &castv1.ListNodesRequest{Filter: "connected = true"})
	if err != nil {
		return
	}
	var keep []string
	for _, n := range nodes {
		for _, in := range n.Agents {
			if in.Name == agent && in.FleetLogins {
				return
			}
		}
		keep = append(keep, n.Name)
	}
	which := "no node is connected"
	if len(keep) > 0 {
		which = "nodes " + strings.Join(keep, ", ") + " keep their user's own login"
	}
	fmt.Fprintf(a.errOut, "cast: warning: no connected node will write %s's fleet accounts (%s); start a node with --fleet-accounts (controlplane --dev: --node-fleet-accounts) to let them replace its login, keeping a backup\n", agent, which)
}

// printHomeAccount reports an account taken from a home: stored, then
// released if asked, and what custody means for that folder.
func (a *app) printHomeAccount(acc *castv1.Account, hl *homeLogin, release bool) error {
	released := false
	if release && hl.tok.HasRefresh {
		if err := hl.release(); err != nil {
			return fmt.Errorf("stored %s account %s, but could not release %s: %w; log in there again before running %s with it", acc.Agent, acc.Name, hl.path, err, acc.Agent)
		}
		released = true
	}
	notice := hl.custodyNotice(released)
	if a.json {
		return a.printJSON(map[string]any{"account": raw(acc), "custody": "cast", "home": hl.dir, "home_released": released, "notice": notice})
	}
	if err := a.printAccount(acc, "stored"); err != nil {
		return err
	}
	fmt.Fprint(a.out, notice)
	return nil
}

// readCredential reads at most 1 MiB; the content is never printed.
func readCredential(in io.Reader, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(io.LimitReader(in, 1<<20))
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// noAccounts is what `cast account ls` and `cast usage` say when the
// fleet has no account yet.
const noAccounts = "no fleet accounts; add one with `cast account add NAME --agent claude --credentials ~/.claude/.credentials.json`"

func (a *app) accountLsCmd() *cobra.Command {
	var agent string
	cmd := listCmd(a, &cobra.Command{
		Use:   "ls [--agent A] [-o json|yaml|wide|name] [--no-headers]",
		Short: "List fleet accounts: which is active, which are limited and until when",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client) (listing[*castv1.Account], error) {
		resp, err := c.AllAccounts(ctx, &castv1.ListAccountsRequest{Agent: agent})
		return listing[*castv1.Account]{key: "accounts", items: resp.GetAccounts(),
			empty: noAccounts,
			name:  func(acc *castv1.Account) string { return acc.Name },
			columns: []column[*castv1.Account]{
				{header: "AGENT", cell: func(acc *castv1.Account) string { return acc.Agent }},
				{header: "NAME", cell: func(acc *castv1.Account) string { return acc.Name }},
				{header: "ACTIVE", cell: func(acc *castv1.Account) string { return yesNo(acc.Active) }},
				{header: "USAGE", cell: usage},
				{header: "LIMITED UNTIL", cell: limitedUntil},
				{header: "SWITCHES", cell: func(acc *castv1.Account) string { return fmt.Sprint(acc.Switches) }},
				{header: "POLICY", wide: true, cell: func(acc *castv1.Account) string { return orDash(acc.Policy) }},
				{header: "USAGE AT", wide: true, cell: func(acc *castv1.Account) string { return ago(acc.UsageTime) }},
			}}, err
	})
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's accounts")
	return cmd
}

func (a *app) accountRmCmd() *cobra.Command {
	return a.namedAccountCmd("rm NAME [--agent A]", "Remove a fleet account that is not active",
		func(ctx context.Context, c *client.Client, name, agent string) error {
			_, err := c.Accounts.DeleteAccount(ctx, &castv1.DeleteAccountRequest{Name: name, Agent: agent})
			return a.replyAs(err, func() any {
				return map[string]any{"deleted": name, "agent": agent}
			}, func() error {
				fmt.Fprintf(a.out, "removed %s account %s\n", agent, name)
				return nil
			})
		})
}

func (a *app) accountUseCmd() *cobra.Command {
	return a.namedAccountCmd("use NAME [--agent A]", "Make an account the active one on every node now (parked turns run again)",
		func(ctx context.Context, c *client.Client, name, agent string) error {
			acc, err := c.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: name, Agent: agent})
			if err != nil {
				return err
			}
			return a.printAccount(acc, "active")
		})
}

// namedAccountCmd is a command on one account (NAME --agent A).
func (a *app) namedAccountCmd(use, short string, run func(ctx context.Context, c *client.Client, name, agent string) error) *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  idArgs(cobra.ExactArgs(1), validate.Name, "account name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withAgent(cmd, args[0], &agent, func(ctx context.Context, c *client.Client) error { return run(ctx, c, args[0], agent) })
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the account's agent (default: the agent of the one account so named)")
	return cmd
}

// withAgent runs an account command that needs an agent, with a client
// and the request deadline. Without --agent the account named name (""
// for none) gives it, when exactly one agent has an account so named.
func (a *app) withAgent(cmd *cobra.Command, name string, agent *string, run func(ctx context.Context, c *client.Client) error) error {
	if *agent == "" && name == "" {
		return usagef("--agent is required")
	}
	return a.call(cmd, func(ctx context.Context, c *client.Client) error {
		if *agent == "" {
			ag, err := accountAgent(ctx, c, name)
			if err != nil {
				return err
			}
			*agent = ag
		}
		return run(ctx, c)
	})
}

// accountAgent is the agent of the one fleet account named name; a name
// no account or several agents' accounts have is a usage mistake.
func accountAgent(ctx context.Context, c *client.Client, name string) (string, error) {
	resp, err := c.AllAccounts(ctx, &castv1.ListAccountsRequest{})
	if err != nil {
		return "", err
	}
	var agents []string
	for _, acc := range resp.GetAccounts() {
		if acc.Name == name {
			agents = append(agents, acc.Agent)
		}
	}
	return theAgent(agents, usagef("no fleet account is named %q; `cast account ls` lists them", name), func(list string) error {
		return usagef("accounts named %q exist for %s: say which with --agent", name, list)
	})
}

// theAgent is the one agent in agents, the one a command without --agent
// acts for: none is the error none; several are a usage mistake, many,
// that names them (sorted, comma-separated) so one can be given.
func theAgent(agents []string, none error, many func(list string) error) (string, error) {
	slices.Sort(agents)
	switch len(agents) {
	case 0:
		return "", none
	case 1:
		return agents[0], nil
	}
	return "", many(strings.Join(agents, ", "))
}

func (a *app) printAccount(acc *castv1.Account, what string) error {
	if a.json {
		return a.printJSON(raw(acc))
	}
	active := ""
	if acc.Active {
		active = " (active)"
	}
	fmt.Fprintf(a.out, "%s %s account %s%s\n", what, acc.Agent, acc.Name, active)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

func limitedUntil(acc *castv1.Account) string {
	end := wire.LimitEndTime(acc)
	if end == nil || !end.AsTime().After(time.Now()) {
		return "-"
	}
	return end.AsTime().Local().Format(time.RFC3339)
}

// usage is each window the provider last reported that has not reset yet,
// e.g. "five_hour 96%, seven_day 40%".
func usage(acc *castv1.Account) string {
	var parts []string
	for _, w := range acc.Usage {
		if t := wire.ResetTime(w); t != nil && !t.AsTime().After(time.Now()) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", w.Name, w.UsedPercent))
	}
	return orDash(strings.Join(parts, ", "))
}
