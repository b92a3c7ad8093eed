package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/wire"
)

// usageCmd is `cast usage`: each fleet account's usage windows (percent
// used, time to reset, how old the figure is) and what a limit does.
func (a *app) usageCmd() *cobra.Command {
	var agent string
	cmd := a.calling(&cobra.Command{
		Use:   "usage [--agent A]",
		Short: "Fleet accounts' usage: each window's use, reset and age, and what a usage limit does",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		resp, err := c.AllAccounts(ctx, &castv1.ListAccountsRequest{Agent: agent})
		if err != nil {
			return err
		}
		rep := newUsageReport(resp, time.Now())
		if a.json {
			return a.printJSON(rep)
		}
		if len(rep.Fleets) == 0 {
			fmt.Fprintln(a.errOut, noAccounts) // a hint, not the report
			return nil
		}
		return rep.print(a.out)
	})
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's accounts")
	return cmd
}

// usageReport is `cast usage --json`; its field names are stable.
type usageReport struct {
	Fleets []fleetUsage `json:"fleets"`
}

type fleetUsage struct {
	Agent           string  `json:"agent"`
	Policy          string  `json:"policy"`
	Active          string  `json:"active"`
	Best            string  `json:"best,omitempty"`
	BestUsedPercent float64 `json:"best_used_percent"`
	PolicyLine      string  `json:"policy_line"`
	// Pending is a choice waiting for a person (the ask policy).
	Pending  *pendingChoice `json:"pending,omitempty"`
	Accounts []accountUsage `json:"accounts"`
}

type pendingChoice struct {
	From     string    `json:"from"`
	Until    time.Time `json:"until"`
	Since    time.Time `json:"since"`
	Sessions []string  `json:"sessions"`
}

type accountUsage struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	Policy string `json:"policy"`
	// PolicyLine is set when the account's policy is not its fleet's.
	PolicyLine   string     `json:"policy_line,omitempty"`
	LimitedUntil *time.Time `json:"limited_until,omitempty"`
	// UsageAt is when a turn last reported the figures; AgeSeconds how old
	// they are; Stale says they are older than quota.StaleAfter.
	UsageAt    *time.Time    `json:"usage_at,omitempty"`
	AgeSeconds *int64        `json:"age_seconds,omitempty"`
	Stale      bool          `json:"stale"`
	Windows    []windowUsage `json:"windows"`
}

type windowUsage struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // session, week, model_week
	Model string `json:"model,omitempty"`
	Title string `json:"title"`
	// UsedPercent is the use now (0 once the window reset since the
	// figure); ReportedPercent what the provider last said.
	UsedPercent     float64    `json:"used_percent"`
	ReportedPercent float64    `json:"reported_percent"`
	WindowMinutes   int        `json:"window_minutes,omitempty"`
	ResetsAt        *time.Time `json:"resets_at,omitempty"`
	ResetsInSeconds *int64     `json:"resets_in_seconds,omitempty"`
	Reset           bool       `json:"reset"` // the window reset since the figure
}

func newUsageReport(resp *castv1.ListAccountsResponse, now time.Time) usageReport {
	rep := usageReport{Fleets: []fleetUsage{}}
	for _, fp := range resp.Fleet {
		f := fleetUsage{Agent: fp.Agent, Policy: fp.Policy, Active: fp.Active, Best: fp.Best, BestUsedPercent: fp.BestUsedPercent, Accounts: []accountUsage{}}
		f.PolicyLine = policyLine(fp.Agent, fp.Policy, fp.Best, fp.BestUsedPercent)
		if p := fp.Pending; p != nil {
			until, since := wire.ChoiceTimes(p)
			f.Pending = &pendingChoice{From: p.From, Until: until, Since: since, Sessions: p.Sessions}
		}
		for _, acc := range resp.Accounts {
			if acc.Agent == fp.Agent {
				f.Accounts = append(f.Accounts, newAccountUsage(acc, fp, now))
			}
		}
		rep.Fleets = append(rep.Fleets, f)
	}
	return rep
}

func newAccountUsage(acc *castv1.Account, fp *castv1.FleetPolicy, now time.Time) accountUsage {
	u := accountUsage{Name: acc.Name, Active: acc.Active, Policy: acc.Policy, Windows: []windowUsage{}}
	if u.Policy != fp.Policy {
		u.PolicyLine = policyLine(fp.Agent, acc.Policy, fp.Best, fp.BestUsedPercent)
	}
	if end := wire.LimitEndTime(acc); end != nil && end.AsTime().After(now) {
		t := end.AsTime()
		u.LimitedUntil = &t
	}
	if acc.UsageTime != nil {
		t := acc.UsageTime.AsTime()
		age := int64(now.Sub(t).Seconds())
		u.UsageAt, u.AgeSeconds, u.Stale = &t, &age, now.Sub(t) > quota.StaleAfter
	}
	for _, w := range wire.WindowsFromProto(acc.Usage) {
		wu := windowUsage{Name: w.Name, Kind: w.Kind(), Model: w.Model, Title: w.Title(), UsedPercent: w.UsedAt(now),
			ReportedPercent: w.UsedPercent, WindowMinutes: w.WindowMinutes, Reset: !w.Open(now)}
		if !w.ResetsAt.IsZero() {
			t, in := w.ResetsAt, max(0, int64(w.ResetsAt.Sub(now).Seconds()))
			wu.ResetsAt, wu.ResetsInSeconds = &t, &in
		}
		u.Windows = append(u.Windows, wu)
	}
	return u
}

// policyLine says what a usage limit does under policy.
func policyLine(agent, policy, best string, bestUsed float64) string {
	hop := "no account has headroom now, so parked sessions wait for the first reset"
	if best != "" {
		hop = fmt.Sprintf("the account with the most headroom (best: %s at %.0f%%)", best, bestUsed)
	}
	switch policy {
	case "auto":
		if best == "" {
			return "On a limit: auto-switch finds that " + hop
		}
		return "On a limit: auto-switch hops to " + hop + " and continues parked sessions"
	case "ask":
		return fmt.Sprintf("On a limit: the session parks and asks: `cast account approve --agent %s` hops to %s, "+
			"`cast account use NAME --agent %s` picks one, `cast account deny --agent %s` waits for the reset", agent, hop, agent, agent)
	case "resume":
		return "On a limit: parked sessions wait on the same account and continue when its window resets"
	case "off":
		return fmt.Sprintf("On a limit: the limit is only recorded; parked sessions wait for `cast account use NAME --agent %s` or a new message", agent)
	}
	return "On a limit: policy " + policy
}

func (rep usageReport) print(w io.Writer) error {
	for i, f := range rep.Fleets {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (policy %s)\n", f.Agent, f.Policy)
		tw := newTable(w)
		fmt.Fprintln(tw, "  ACCOUNT\tWINDOW\tUSED\tRESETS\tAS OF")
		for _, acc := range f.Accounts {
			name := acc.Name
			if acc.Active {
				name += " (active)"
			}
			asOf := "no usage reported yet"
			if acc.AgeSeconds != nil {
				asOf = span(time.Duration(*acc.AgeSeconds)*time.Second) + " ago"
				if acc.Stale {
					asOf += " (stale)"
				}
			}
			if acc.LimitedUntil != nil {
				asOf += ", limited until " + acc.LimitedUntil.Local().Format(time.RFC3339)
			}
			if len(acc.Windows) == 0 {
				fmt.Fprintf(tw, "  %s\t-\t-\t-\t%s\n", name, asOf)
			}
			for _, win := range acc.Windows {
				fmt.Fprintf(tw, "  %s\t%s\t%.0f%%\t%s\t%s\n", name, win.Title, win.UsedPercent, resets(win), asOf)
				name, asOf = "", ""
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, f.PolicyLine)
		if p := f.Pending; p != nil {
			fmt.Fprintf(w, "Waiting for a choice: %s is at its limit (until %s); %d parked session(s): %s. Answer with `cast account approve|deny --agent %s` or `cast account use NAME --agent %s`\n",
				p.From, p.Until.Local().Format(time.RFC3339), len(p.Sessions), strings.Join(p.Sessions, ", "), f.Agent, f.Agent)
		}
		for _, acc := range f.Accounts {
			if acc.PolicyLine != "" {
				fmt.Fprintf(w, "%s (policy %s): %s\n", acc.Name, acc.Policy, strings.TrimPrefix(acc.PolicyLine, "On a limit: "))
			}
		}
	}
	return nil
}

func resets(w windowUsage) string {
	switch {
	case w.Reset:
		return fmt.Sprintf("reset since (was %.0f%%)", w.ReportedPercent)
	case w.ResetsInSeconds == nil:
		return "-"
	}
	return "resets in " + span(time.Duration(*w.ResetsInSeconds)*time.Second)
}

// span renders a duration the way people say it: "4h 5m", "3d 2h", "12m", "40s".
func span(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}
