package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// accountPolicyCmd is `cast account policy NAME POLICY --agent A`: what a
// usage limit on that account does.
func (a *app) accountPolicyCmd() *cobra.Command {
	var policy string
	cmd := a.namedAccountCmd("policy NAME ask|auto|resume|off|fleet [--agent A]",
		"Set what a usage limit on one account does (fleet: follow the control plane's --account-policy)",
		func(ctx context.Context, c *client.Client, name, agent string) error {
			acc, err := c.Accounts.SetAccountPolicy(ctx, &castv1.SetAccountPolicyRequest{Name: name, Agent: agent, Policy: policy})
			return a.reply(acc, err, func() error {
				fmt.Fprintf(a.out, "%s account %s: policy %s\n", acc.Agent, acc.Name, acc.Policy)
				return nil
			})
		})
	cmd.Args = idArgs(cobra.ExactArgs(2), validate.Name, "account name")
	// POLICY is checked before anything is called: a wrong one is a usage
	// mistake even with no control plane.
	cmd.PreRunE = func(_ *cobra.Command, args []string) (err error) {
		policy, err = accountPolicy(args[1])
		return err
	}
	return cmd
}

// accountPolicy is the policy the control plane stores for arg: "" for
// fleet (follow the fleet's --account-policy).
func accountPolicy(arg string) (string, error) {
	switch arg {
	case "fleet":
		return "", nil
	case "ask", "auto", "resume", "off":
		return arg, nil
	}
	return "", usagef("policy %q: use ask, auto, resume, off or fleet", arg)
}

// accountAnswerCmd is `cast account approve|deny [--agent A]`: the answer
// to a pending choice (the ask policy). Without --agent it answers the one
// agent whose choice waits.
func (a *app) accountAnswerCmd(approve bool) *cobra.Command {
	var agent string
	use, short := "approve [--agent A]", "Answer a waiting account choice: switch to the account with the most headroom; parked sessions continue"
	if !approve {
		use, short = "deny [--agent A]", "Answer a waiting account choice: stay on the limited account; parked sessions continue at its reset"
	}
	cmd := a.calling(&cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		if agent == "" {
			ag, err := waitingChoice(ctx, c)
			if err != nil {
				return err
			}
			agent = ag
		}
		resp, err := c.Accounts.AnswerAccountChoice(ctx, &castv1.AnswerAccountChoiceRequest{Agent: agent, Approve: approve})
		return a.reply(resp, err, func() error {
			what := "waiting for its reset on"
			if approve {
				what = "now on"
			}
			fmt.Fprintf(a.out, "%s: %s account %s (%d parked session(s): %s)\n", agent, what, resp.Active, len(resp.Sessions), strings.Join(resp.Sessions, ", "))
			return nil
		})
	})
	cmd.Flags().StringVar(&agent, "agent", "", "the fleet's agent (default: the one agent whose choice waits)")
	return cmd
}

// waitingChoice is the one agent whose account choice waits for an answer.
// None waiting is an error of state (as the control plane's answer for a
// named agent); several are a usage mistake that names them.
func waitingChoice(ctx context.Context, c *client.Client) (string, error) {
	resp, err := c.AllAccounts(ctx, &castv1.ListAccountsRequest{})
	if err != nil {
		return "", err
	}
	var agents []string
	for _, f := range resp.GetFleet() {
		if f.GetPending() != nil {
			agents = append(agents, f.Agent)
		}
	}
	return theAgent(agents, errors.New("no agent is waiting for an account choice (`cast usage` shows each agent's accounts)"), func(list string) error {
		return usagef("account choices wait for %s: say which with --agent", list)
	})
}
