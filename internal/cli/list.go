package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/listfilter"
)

// lsFilter narrows `cast ls`; empty fields match everything.
type lsFilter struct {
	agent, node, state, origin string
}

// Session origins `cast ls --origin` takes: adopted from an agent's own
// folder, or started (or imported) through cast.
const (
	originNative = "native"
	originCast   = "cast"
)

// sessionOrigin is s's origin as --origin names it.
func sessionOrigin(s *castv1.Session) string {
	if s.Origin != nil {
		return originNative
	}
	return originCast
}

// expr is the ListSessions filter the flags make: the control plane
// filters, so only matching sessions cross the wire.
func (f lsFilter) expr() string {
	return listfilter.Equal("agent", f.agent, "node", f.node, "state", f.state, "origin", f.origin)
}

// match is the same filter on the client: a control plane older than
// list filters answers every session, and its answer is narrowed here.
func (f lsFilter) match(s *castv1.Session) bool {
	return (f.agent == "" || s.Agent == f.agent) && (f.node == "" || s.Node == f.node) &&
		(f.state == "" || stateName(s.State) == f.state) && (f.origin == "" || sessionOrigin(s) == f.origin)
}

func (a *app) lsCmd() *cobra.Command {
	var all bool
	var f lsFilter
	var out listFlags
	cmd := &cobra.Command{
		Use:   "ls [--agent A] [--node N] [--state S] [--origin native|cast] [--all] [-o json|yaml|wide|name] [--no-headers]",
		Short: "List sessions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.state != "" && !slices.Contains(stateNames(), f.state) {
				return usagef("--state %q is not a state; use one of %s", f.state, strings.Join(stateNames(), ", "))
			}
			if f.origin != "" && f.origin != originNative && f.origin != originCast {
				return usagef("--origin is %s or %s", originNative, originCast)
			}
			list, err := a.listSessions(cmd.Context(), all, f.expr())
			if err != nil {
				return err
			}
			list = slices.DeleteFunc(list, func(s *castv1.Session) bool { return !f.match(s) })
			sortNewestFirst(list)
			empty := "no sessions yet; start one with `cast new --agent claude \"hello\"`"
			if f != (lsFilter{}) {
				empty = "no sessions match; `cast ls` without filters lists them all"
			}
			if len(list) == 0 && f.node != "" {
				if err := a.checkNode(cmd.Context(), f.node); err != nil {
					return err
				}
			}
			return printList(a, out, listing[*castv1.Session]{key: "sessions", items: list, empty: empty,
				name: func(s *castv1.Session) string { return s.Id }, columns: sessionColumns()})
		},
	}
	out.bind(cmd, a)
	cmd.Flags().BoolVar(&all, "all", false, "include subagent workers and archived sessions")
	cmd.Flags().StringVar(&f.agent, "agent", "", "only sessions on this agent")
	cmd.Flags().StringVar(&f.node, "node", "", "only sessions owned by this node")
	cmd.Flags().StringVar(&f.state, "state", "", "only sessions in this state: "+strings.Join(stateNames(), ", "))
	cmd.Flags().StringVar(&f.origin, "origin", "", "only sessions of this origin: native (adopted from an agent's own folder by a node) or cast")
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(stateNames(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("origin", cobra.FixedCompletions([]string{originNative, originCast}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// checkNode refuses a --node no control plane knows (a typo) as a usage
// mistake, as checkAgent does an agent. Asked only when the filter matched
// nothing, by name: one small call, and none on the usual path.
func (a *app) checkNode(parent context.Context, name string) error {
	var nodes []*castv1.Node
	err := a.callIn(parent, func(ctx context.Context, c *client.Client) (err error) {
		nodes, err = c.AllNodes(ctx, &castv1.ListNodesRequest{Filter: listfilter.Equal("name", name)})
		return err
	})
	if err != nil {
		return err
	}
	// A control plane older than list filters answers every node.
	if slices.ContainsFunc(nodes, func(n *castv1.Node) bool { return n.Name == name }) {
		return nil
	}
	return usagef("unknown node %q; `cast node ls` lists the nodes", name)
}

// listSessions reads every page of the sessions filter matches.
func (a *app) listSessions(parent context.Context, all bool, filter string) ([]*castv1.Session, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	// Through the one pager, each page under its own --timeout.
	perPage := func(ctx context.Context, req *castv1.ListSessionsRequest, opts ...grpc.CallOption) (*castv1.ListSessionsResponse, error) {
		ctx, cancel := a.ctx(ctx)
		defer cancel()
		return c.Sessions.ListSessions(ctx, req, opts...)
	}
	return client.ListAll(parent, &castv1.ListSessionsRequest{IncludeSubagents: all, IncludeArchived: all, Filter: filter},
		perPage, (*castv1.ListSessionsResponse).GetSessions)
}

// sortNewestFirst orders by creation time, newest first (ids break ties so
// the order is stable).
func sortNewestFirst(list []*castv1.Session) {
	slices.SortStableFunc(list, func(x, y *castv1.Session) int {
		if c := y.CreateTime.AsTime().Compare(x.CreateTime.AsTime()); c != 0 {
			return c
		}
		return strings.Compare(x.Id, y.Id)
	})
}

// noteWidth bounds the last column, so one long failure reason is cut
// instead of pushing the table off the screen.
const noteWidth = 60

// sessionColumns are cast ls's table. STATE is as wide as the longest
// state name, so rows line up whatever states the list holds.
func sessionColumns() []column[*castv1.Session] {
	width := 0
	for _, n := range stateNames() {
		width = max(width, len(n))
	}
	pad := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	return []column[*castv1.Session]{
		{header: "ID", cell: func(s *castv1.Session) string { return s.Id }},
		{header: "AGENT", cell: func(s *castv1.Session) string { return s.Agent }},
		{header: "MODEL", wide: true, cell: func(s *castv1.Session) string { return orDash(s.Model) }},
		{header: "ACCOUNT", wide: true, cell: func(s *castv1.Session) string { return orDash(s.Account) }},
		{header: "NODE", cell: func(s *castv1.Session) string { return orDash(s.Node) }},
		{header: pad("STATE"), cell: func(s *castv1.Session) string { return pad(stateName(s.State)) }},
		{header: "MSGS", cell: func(s *castv1.Session) string { return fmt.Sprint(s.LastSeq) }},
		{header: "CREATED", wide: true, cell: func(s *castv1.Session) string { return ago(s.CreateTime) }},
		{header: "UPDATED", cell: func(s *castv1.Session) string { return ago(s.UpdateTime) }},
		{header: "CWD", wide: true, cell: func(s *castv1.Session) string { return orDash(s.Cwd) }},
		{header: "TITLE", cell: func(s *castv1.Session) string { return orDash(s.Title) }},
		{header: "NOTE", cell: func(s *castv1.Session) string { return clip(sessionNote(s), noteWidth) }},
	}
}

// sessionNote is what a state alone does not say: a move in progress or the
// reason of a failure or a park.
func sessionNote(s *castv1.Session) string {
	var parts []string
	if s.Archived {
		parts = append(parts, "archived")
	}
	if s.FencedBy != "" {
		parts = append(parts, "moving: "+s.FencedBy)
	}
	if s.StateReason != "" {
		parts = append(parts, s.StateReason)
	}
	return strings.Join(parts, "; ")
}

// clip shortens s to n runes on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// stateNames are the states people can filter on, sorted.
func stateNames() []string {
	var out []string
	for v := range castv1.SessionState_name {
		if st := castv1.SessionState(v); st != castv1.SessionState_SESSION_STATE_UNSPECIFIED {
			out = append(out, stateName(st))
		}
	}
	slices.Sort(out)
	return out
}
