package cli

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Shell completion (`cast completion bash|zsh|fish|powershell`, cobra's)
// completes what lives on the control plane: session ids (with agent and
// title), node names and labels, and the agents the nodes have. Asked of
// the control plane with a short deadline; any error completes nothing
// rather than printing into the user's prompt.

const completeTimeout = 2 * time.Second

// completions wires the completion functions into every command under
// root by what its usage line and flags name, so a new command gets them
// by naming its arguments the usual way.
func (a *app) completions(root *cobra.Command) {
	for _, cmd := range append([]*cobra.Command{root}, allCommands(root)...) {
		parent := ""
		if cmd.Parent() != nil {
			parent = cmd.Parent().Name()
		}
		if cmd.ValidArgsFunction == nil && parent != "migrate" { // migrate's IDs are migrations'
			switch arg := firstArg(cmd); {
			case arg == "ID" || arg == "[ID]" || arg == "[FORK_ID]":
				cmd.ValidArgsFunction = a.completeArgs(a.sessions, false)
			case arg == "NODE" || arg == "NAME" && parent == "node":
				cmd.ValidArgsFunction = a.completeArgs(a.nodeNames, false)
			case arg == "NAME" && parent == "account" && cmd.Name() != "add":
				cmd.ValidArgsFunction = a.completeArgs(a.accountNames, false)
			case (arg == "NAME" || arg == "[NAME...]") && parent == "config":
				cmd.ValidArgsFunction = a.completeArgs(contextNames, arg != "NAME")
			}
		}
		if cmd.Name() == "start" && parent == "migrate" {
			cmd.ValidArgsFunction = a.completeArgs(a.sessions, true)
		}
		for flag, fn := range map[string]func(context.Context) []string{
			"session": a.sessions, "node": a.nodeNames, "from": a.nodeNames, "agent": a.agentNames,
		} {
			if f := cmd.Flags().Lookup(flag); f != nil && f.Deprecated == "" {
				_ = cmd.RegisterFlagCompletionFunc(flag, a.completeAny(fn))
			}
		}
		if f := cmd.Flags().Lookup("to"); f != nil && f.Deprecated == "" {
			_ = cmd.RegisterFlagCompletionFunc("to", a.completeAny(a.nodesAndLabels)) // migrate start --to NODE|LABEL
		}
	}
	_ = root.RegisterFlagCompletionFunc("context", a.completeAny(contextNames))
}

func allCommands(cmd *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range cmd.Commands() {
		out = append(append(out, sub), allCommands(sub)...)
	}
	return out
}

// firstArg is the first positional word of the command's usage line:
// flags and the value words after them ("--to NODE|LABEL", "[--agent A]")
// are skipped.
func firstArg(cmd *cobra.Command) string {
	words := strings.Fields(cmd.Use)[1:]
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "[-") {
			return w
		}
		takesValue := !strings.HasSuffix(w, "]") && !strings.Contains(w, "=")
		if takesValue && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && !strings.HasPrefix(words[i+1], "[") && !strings.HasPrefix(words[i+1], "(") {
			i++ // the flag's value
		}
	}
	return ""
}

type completeFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// completeArgs completes the first positional argument, or every one
// with many.
func (a *app) completeArgs(list func(context.Context) []string, many bool) completeFunc {
	all := a.completeAny(list)
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return all(cmd, args, prefix)
	}
}

func (a *app) completeAny(list func(context.Context) []string) completeFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		var out []string
		for _, c := range list(ctx) {
			if strings.HasPrefix(c, prefix) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// ask is one completion query: nothing (the zero value) when the client
// or the query fails, so a completion never prints an error.
func ask[T any](a *app, query func(*client.Client) (T, error)) T {
	var none T
	c, err := a.client()
	if err != nil {
		return none
	}
	v, err := query(c)
	if err != nil {
		return none
	}
	return v
}

// sessions are "ID\tagent · title" (the shell shows the description).
func (a *app) sessions(ctx context.Context) []string {
	resp := ask(a, func(c *client.Client) (*castv1.ListSessionsResponse, error) {
		return c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	})
	out := make([]string, 0, len(resp.GetSessions()))
	for _, s := range resp.GetSessions() {
		out = append(out, s.Id+"\t"+oneLine(s.Agent+" · "+s.Title))
	}
	return out
}

func (a *app) nodes(ctx context.Context) []*castv1.Node {
	return ask(a, func(c *client.Client) ([]*castv1.Node, error) {
		return c.AllNodes(ctx, &castv1.ListNodesRequest{})
	})
}

// contextNames are the contexts file's (read locally; no control plane).
func contextNames(context.Context) []string {
	cfg, err := client.LoadConfig(configPath())
	if err != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(cfg.Contexts))
}

func (a *app) nodeNames(ctx context.Context) []string {
	var out []string
	for _, n := range a.nodes(ctx) {
		out = append(out, n.Name)
	}
	return out
}

func (a *app) nodesAndLabels(ctx context.Context) []string {
	return a.sortedNodeWords(ctx, true)
}

// nodeLabels are the labels nodes carry (`cast node ls --label`).
func (a *app) nodeLabels(ctx context.Context) []string {
	return a.sortedNodeWords(ctx, false)
}

// sortedNodeWords are the nodes' labels, and their names with names.
func (a *app) sortedNodeWords(ctx context.Context, names bool) []string {
	var out []string
	for _, n := range a.nodes(ctx) {
		if names {
			out = append(out, n.Name)
		}
		out = append(out, n.Labels...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// accountNames are the fleet's account names (admins only; anyone else
// completes nothing).
func (a *app) accountNames(ctx context.Context) []string {
	resp := ask(a, func(c *client.Client) (*castv1.ListAccountsResponse, error) {
		return c.AllAccounts(ctx, &castv1.ListAccountsRequest{})
	})
	var out []string
	for _, acc := range resp.GetAccounts() {
		out = append(out, acc.Name+"\t"+acc.Agent)
	}
	return out
}

// agentNames are the agents some node has installed.
func (a *app) agentNames(ctx context.Context) []string {
	var out []string
	for _, n := range a.nodes(ctx) {
		for _, ag := range n.Agents {
			out = append(out, ag.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// oneLine keeps a completion description on one short line of printable
// text: a title is whatever the user typed first, and it goes to a shell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}
