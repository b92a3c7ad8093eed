package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func (a *app) getCmd() *cobra.Command {
	var out objectOutput
	cmd := onSession(&cobra.Command{
		Use:     "get ID [-o json|yaml|name]",
		Aliases: []string{"describe"},
		Short:   "Show one session whole: agent, model, node, state, folders, links, counts, last error, times",
	}, sessionUse{hint: "cast get ID; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			sess, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: id})
			if err != nil {
				return err
			}
			return out.print(a, sess, sess.Id, func() error {
				tw := newTable(a.out)
				for _, row := range describeRows(sess) {
					if row[1] != "" {
						fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
					}
				}
				return tw.Flush()
			})
		})
	})
	out.bind(cmd, a)
	return cmd
}

// describeRows are `cast get`'s fields in the order people read them;
// empty values are left out.
func describeRows(s *castv1.Session) [][2]string {
	state := stateName(s.State)
	if s.FencedBy != "" {
		state += " (moving: " + s.FencedBy + ")"
	}
	reason := ""
	if s.State == castv1.SessionState_SESSION_STATE_PARKED {
		reason = s.StateReason
	}
	return [][2]string{
		{"id", s.Id},
		{"title", s.Title},
		{"agent", s.Agent},
		{"model", orDefault(s.Model)},
		{"effort", s.Effort},
		{"account", s.Account},
		{"node", s.Node},
		{"state", state},
		{"archived", yesOrEmpty(s.Archived)},
		{"parked", reason},
		{"last error", lastError(s)},
		{"last turn", lastTurn(s)},
		{"cwd", s.Cwd},
		{"worktree", s.WorktreeBranch},
		{"checkout", s.Checkout},
		{"parent", s.ParentId},
		{"started by call", s.ParentCallId},
		{"forked at", seqOrEmpty(s.ForkedAtSeq)},
		{"root", rootIfOther(s)},
		{"handed off from", s.HandoffFrom},
		{"adopted from", adoptedFrom(s.Origin)},
		{"subagent", yesOrEmpty(s.Subagent)},
		{"messages", fmt.Sprint(s.LastSeq)},
		{"history", seqOrEmpty(s.HistorySeq)},
		{"delivered", seqOrEmpty(s.DeliveredSeq)},
		{"merged up to", seqOrEmpty(s.MergedUptoSeq)},
		{"pins", strings.Join(s.Pins, "; ")},
		{"created", when(s.CreateTime)},
		{"updated", when(s.UpdateTime)},
	}
}

// lastError is why the session failed and its last turn's exit code, ""
// when neither.
func lastError(s *castv1.Session) string {
	var errs []string
	if s.State == castv1.SessionState_SESSION_STATE_FAILED && s.StateReason != "" {
		errs = append(errs, s.StateReason)
	}
	// An interrupt's signal is no error, nor a move's, whose turn runs again.
	if s.LastExitCode != 0 && !s.LastTurnInterrupted && !s.LastTurnAbandoned {
		errs = append(errs, fmt.Sprintf("exit %d", s.LastExitCode))
	}
	return strings.Join(errs, "; ")
}

// lastTurn is how the last turn ended when it did not finish: interrupted,
// or stopped by a move; "" otherwise.
func lastTurn(s *castv1.Session) string {
	switch {
	case s.LastTurnInterrupted:
		return "interrupted" // stopped, not failed: no last error
	case s.LastTurnAbandoned:
		// The session shows idle while its prompt waits to run again
		// (until that turn starts, when the store clears the flag).
		turn := "stopped by a move or its node going away; its prompt runs again"
		switch {
		case s.FencedBy != "":
			turn += " once the move ends" // where it lands, or here if it is cancelled
		case s.Node != "":
			turn += " on " + s.Node
		}
		return turn
	}
	return ""
}

func orDefault(s string) string {
	if s == "" {
		return "(the agent's default)"
	}
	return s
}

func seqOrEmpty(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("#%d", n)
}

func yesOrEmpty(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func rootIfOther(s *castv1.Session) string {
	if s.RootId == s.Id {
		return ""
	}
	return s.RootId
}

func when(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().Local().Format(time.RFC3339) + " (" + ago(ts) + ")"
}

// adoptedFrom says where an adopted session's native transcript was.
func adoptedFrom(o *castv1.SessionOrigin) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf("%s session %s on %s (%s)", o.Agent, o.NativeId, o.Node, o.Path)
}
