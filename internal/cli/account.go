package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// accountCmd is `cast account`: fleet accounts, the credential snapshots
// the control plane switches between when a session hits a usage limit.
func (a *app) accountCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "account",
		Short: "Fleet accounts: credentials every node's shared store is switched between on usage limits",
	}
	cmd.AddCommand(a.accountAddCmd(), a.accountLsCmd(), a.accountRmCmd(), a.accountUseCmd())
	return cmd
}

func (a *app) accountAddCmd() *cobra.Command {
	var agent, file string
	cmd := &cobra.Command{
		Use:   "add NAME --agent claude|codex --credentials FILE|-",
		Short: "Store an account's credential file (sealed at rest); the agent's first account becomes active",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" || file == "" {
				return usagef("--agent and --credentials are required (Claude: .credentials.json, Codex: auth.json; - reads stdin)")
			}
			cred, err := readCredential(a.in, file)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd.Context())
			defer cancel()
			acc, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: args[0], Agent: agent, Credential: cred})
			if err != nil {
				return err
			}
			return a.printAccount(acc, "stored")
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent whose credential store it fills: claude or codex")
	cmd.Flags().StringVar(&file, "credentials", "", "credential file to store (- reads stdin)")
	return cmd
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

func (a *app) accountLsCmd() *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "ls [--agent A]",
		Short: "List fleet accounts: which is active, which are limited and until when",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd.Context())
			defer cancel()
			resp, err := c.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{Agent: agent})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"accounts": raws(resp.Accounts)})
			}
			if len(resp.Accounts) == 0 {
				fmt.Fprintln(a.out, "no fleet accounts; add one with `cast account add NAME --agent claude --credentials ~/.claude/.credentials.json`")
				return nil
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tNAME\tACTIVE\tUSAGE\tLIMITED UNTIL\tSWITCHES")
			for _, acc := range resp.Accounts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", acc.Agent, acc.Name, yesNo(acc.Active), usage(acc), limitedUntil(acc), acc.Switches)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's accounts")
	return cmd
}

func (a *app) accountRmCmd() *cobra.Command {
	return a.namedAccountCmd("rm NAME --agent A", "Remove a fleet account that is not active",
		func(ctx context.Context, c *client.Client, name, agent string) error {
			if _, err := c.Accounts.DeleteAccount(ctx, &castv1.DeleteAccountRequest{Name: name, Agent: agent}); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"deleted": name, "agent": agent})
			}
			fmt.Fprintf(a.out, "removed %s account %s\n", agent, name)
			return nil
		})
}

func (a *app) accountUseCmd() *cobra.Command {
	return a.namedAccountCmd("use NAME --agent A", "Make an account the active one on every node now (parked turns run again)",
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
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return usagef("--agent is required")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd.Context())
			defer cancel()
			return run(ctx, c, args[0], agent)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the account's agent")
	return cmd
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
	if acc.LimitedUntil == nil || !acc.LimitedUntil.AsTime().After(time.Now()) {
		return "-"
	}
	return acc.LimitedUntil.AsTime().Local().Format(time.RFC3339)
}

// usage is each window the provider last reported that has not reset yet,
// e.g. "five_hour 96%, seven_day 40%".
func usage(acc *castv1.Account) string {
	var parts []string
	for _, w := range acc.Usage {
		if w.ResetsAt != nil && !w.ResetsAt.AsTime().After(time.Now()) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", w.Name, w.UsedPercent))
	}
	return orDash(strings.Join(parts, ", "))
}
