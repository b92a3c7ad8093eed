package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/transcript"
)

func (a *app) switchCmd() *cobra.Command {
	var agent, model, effort string
	var fork bool
	cmd := onSession(&cobra.Command{
		Use:   "switch ID [--agent A] [--model M] [--effort E] [--fork]",
		Short: "Switch a session's agent, model or effort in place (--fork: onto a new fork instead)",
	}, sessionUse{hint: "cast switch ID --agent A; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		if agent == "" && model == "" && effort == "" {
			return usagef("say what to switch to: --agent, --model or --effort")
		}
		if fork {
			if effort != "" {
				return usagef("--effort cannot be set on a fork yet; fork, then switch the fork")
			}
			return a.fork(cmd.Context(), &castv1.ForkSessionRequest{SessionId: id, Agent: agent, Model: model, RequestId: ids.NewClientID()})
		}
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			// What ran before: a switch to another agent stops the old
			// one's turn, and its request stays unanswered in the history.
			// The switch itself reports any error reading it.
			before, _ := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: id})
			sess, err := c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: id, Agent: agent, Model: model, Effort: effort})
			return a.reply(sess, err, func() error {
				if sess.HandoffFrom == id {
					return a.printHandedOff(ctx, c, sess)
				}
				fmt.Fprintf(a.out, "%s now runs %s%s%s; the next message goes to it\n", sess.Id, sess.Agent, suffix(" · ", sess.Model), suffix(" · effort ", sess.Effort))
				if before != nil && before.Agent != sess.Agent && fence.TurnInFlight(before) {
					fmt.Fprintf(a.out, "it stopped the turn %s was running: that request stays in the history unanswered; send it again for %s to act on it\n",
						agents.DisplayName(before.Agent), agents.DisplayName(sess.Agent))
				}
				return nil
			})
		})
	})

	cmd.Flags().StringVar(&agent, "agent", "", "new agent")
	cmd.Flags().StringVar(&model, "model", "", "new model")
	cmd.Flags().StringVar(&effort, "effort", "", "new reasoning effort")
	cmd.Flags().BoolVar(&fork, "fork", false, "fork onto the agent instead of switching in place")
	return cmd
}

func (a *app) forkCmd() *cobra.Command {
	var at int64
	var tip bool
	var agent, model, node, branch string
	cmd := onSession(&cobra.Command{
		Use:   "fork ID [--at SEQ | --tip] [--agent A] [--worktree [BRANCH]]",
		Short: "Copy a session into a new one (up to SEQ, default the tip), on the same or another agent",
	}, sessionUse{rest: 1, hint: "cast fork ID; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, args []string) error {
		if err := worktreeArg(cmd, &branch, args); err != nil {
			return err
		}
		dflt := branch == defaultWorktree || (branch == "" && cmd.Flags().Changed("worktree"))
		if branch == defaultWorktree {
			branch = ""
		}
		if tip && at != 0 {
			return usagef("use --at SEQ or --tip, not both")
		}
		if at < 0 {
			return usagef("--at must be a seq (1-based)")
		}
		if err := checkBranch(branch); err != nil {
			return err
		}
		return a.fork(cmd.Context(), &castv1.ForkSessionRequest{SessionId: id, AtSeq: at, Agent: agent, Model: model, Node: node,
			RequestId: ids.NewClientID(), WorktreeBranch: branch, WorktreeDefault: dflt})
	})

	cmd.Flags().Int64Var(&at, "at", 0, "last message (seq) to copy")
	cmd.Flags().BoolVar(&tip, "tip", false, "copy everything (the default)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent for the fork (default: the same)")
	cmd.Flags().StringVar(&model, "model", "", "model for the fork")
	cmd.Flags().StringVar(&node, "node", "", "node for the fork (default: the same)")
	cmd.Flags().StringVar(&branch, "worktree", "", "run the fork in its own git worktree on this branch (made from the parent's checkout; alone: cast/<title-slug>--<id>)")
	cmd.Flags().Lookup("worktree").NoOptDefVal = defaultWorktree
	return cmd
}

// worktreeArg reads a --worktree that takes its branch as the next word
// (`--worktree fix-42`): pflag gives an optional flag's value only as
// --worktree=fix-42, so the branch arrives as cmd's one other argument.
// Any other argument is a usage error. cast fork and cast workspace set.
func worktreeArg(cmd *cobra.Command, branch *string, args []string) error {
	if *branch == defaultWorktree && len(args) == 1 {
		*branch, args = args[0], nil // --worktree BRANCH
	}
	if len(args) > 0 {
		return usagef("unexpected argument %q; see `%s --help`", args[0], cmd.CommandPath())
	}
	return nil
}

// checkBranch refuses a --worktree branch git cannot name, before
// anything is sent (cast new and cast fork).
func checkBranch(branch string) error {
	if branch != "" && !ids.ValidBranch(branch) {
		return usagef("--worktree %q is not a valid branch name (no leading '-', spaces, '..', '~', '^', ':', '?', '*', '[')", branch)
	}
	return nil
}

func (a *app) fork(parent context.Context, req *castv1.ForkSessionRequest) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	sess, err := retried(a, parent, func(ctx context.Context) (*castv1.Session, error) {
		return c.Sessions.ForkSession(ctx, req)
	})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(raw(sess))
	}
	if sess.HandoffFrom == req.SessionId {
		ctx, cancel := a.ctx(parent)
		defer cancel()
		return a.printHandedOff(ctx, c, sess)
	}
	fmt.Fprintln(a.out, sess.Id)
	fmt.Fprintf(a.errOut, "forked %s at #%d onto %s; continue it with `cast send %s ...`\n", sess.ParentId, sess.ForkedAtSeq, sess.Agent, sess.Id)
	return nil
}

// printHandedOff reports a switch or fork that became a handoff (the
// agent's installed version failed its canary): the new session's id, and
// on stderr the notice in the source's thread, which says why.
func (a *app) printHandedOff(ctx context.Context, c *client.Client, sess *castv1.Session) error {
	fmt.Fprintln(a.out, sess.Id)
	why := "see `cast agents`"
	src, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: sess.HandoffFrom})
	if err != nil {
		return err
	}
	msgs, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: src.Id, StartSeq: max(1, src.LastSeq-9), EndSeq: src.LastSeq})
	if err != nil {
		return err
	}
	for _, m := range msgs.Messages {
		if m.NoticeType == transcript.NoticeHandoff && strings.Contains(m.Text, sess.Id) {
			why = m.Text
		}
	}
	fmt.Fprintf(a.errOut, "handed off to a new session %s on %s instead: %s\n", sess.Id, sess.Agent, a.forScreen(why))
	return nil
}

func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

func (a *app) spawnCmd() *cobra.Command {
	var parent, agent, model, cwd, node string
	var subagent bool
	cmd := &cobra.Command{
		Use:   "spawn --subagent --agent A [--parent ID] TASK",
		Short: "Start a nested worker session; its parent gets a message when it finishes, blocks or waits on a permission",
		RunE: func(cmd *cobra.Command, args []string) error {
			if !subagent {
				return usagef("only --subagent workers can be spawned; use `cast new` for a top-level session")
			}
			if agent == "" {
				return usagef("--agent is required")
			}
			if parent == "" {
				parent = os.Getenv("CAST_SESSION") // set for agents a cast node runs
			}
			if parent == "" {
				return usagef("--parent ID is required outside a cast session")
			}
			task, err := a.messageArg(args, false)
			if err != nil {
				return err
			}
			if cwd != "" {
				if cwd, err = filepath.Abs(cwd); err != nil {
					return err
				}
			}
			req := &castv1.CreateSessionRequest{Agent: agent, Model: model, Cwd: cwd, Node: node, Text: task, ParentId: parent, RequestId: ids.NewClientID()}
			sess, err := a.createSession(cmd.Context(), req)
			return a.reply(sess, err, func() error {
				fmt.Fprintln(a.out, sess.Id)
				fmt.Fprintf(a.errOut, "worker %s started on %s; %s will get a message when it finishes (`cast ls --all` lists workers)\n", sess.Id, sess.Agent, parent)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&subagent, "subagent", false, "a nested worker with no shared history")
	cmd.Flags().StringVar(&parent, "parent", "", "parent session (default: $CAST_SESSION)")
	// TASK is spawn's argument, so the parent is a flag; -s/--session
	// stays its hidden alias as on every command that takes a session.
	sessionFlag(cmd, &parent)
	cmd.Flags().StringVar(&agent, "agent", "", "agent for the worker (any, Cursor and Muse included)")
	cmd.Flags().StringVar(&model, "model", "", "model for the worker")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default: the parent's)")
	cmd.Flags().StringVar(&node, "node", "", "node (default: the parent's)")
	return cmd
}

func (a *app) mergeCmd() *cobra.Command {
	var msg string
	var run bool
	cmd := onSession(&cobra.Command{
		Use:   "merge [FORK_ID] [MESSAGE] [--run] [-m TEXT|-]",
		Short: "Bring a fork's unmerged work into its parent's history; a turn runs on it only with --run or a message",
		Long: `Bring a fork's unmerged work into its parent's history as one history-framed message.

Nothing runs: the parent's agent reads the merged work at the start of its next
turn. --run starts that turn now, so the agent answers the merge; a MESSAGE (or
-m TEXT, - reads stdin) is sent with the merge as the parent's next message and
runs the turn on it.`,
	}, sessionUse{rest: anyRest, env: "CAST_SESSION", hint: "cast merge FORK_ID (required outside a cast session)"}, func(cmd *cobra.Command, id string, args []string) error {
		text, err := a.mergeMessage(args, msg)
		if err != nil {
			return err
		}
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Sessions.MergeSession(ctx, &castv1.MergeSessionRequest{ForkId: id, Run: run, Message: text})
			return a.replyAs(err, func() any {
				return map[string]any{"fork_id": id, "parent_id": resp.Parent.Id, "from_seq": resp.FromSeq,
					"to_seq": resp.ToSeq, "included": resp.Included, "omitted": resp.Omitted, "prompt_seq": resp.PromptSeq}
			}, func() error {
				fmt.Fprintf(a.out, "merged %s #%d-%d into %s (%d items, %d left out)", id, resp.FromSeq, resp.ToSeq, resp.Parent.Id, resp.Included, resp.Omitted)
				if resp.PromptSeq == 0 {
					fmt.Fprintf(a.out, "; its agent reads it on its next turn (nothing runs now)\n")
					fmt.Fprintln(a.errOut, "--run or a message runs one")
					return nil
				}
				fmt.Fprintf(a.out, "; a turn runs on it (#%d)\n", resp.PromptSeq)
				fmt.Fprintf(a.errOut, "`cast watch %s` follows it\n", resp.Parent.Id)
				return nil
			})
		})
	})
	cmd.Flags().BoolVar(&run, "run", false, "run a turn on the parent now, so its agent answers the merge")
	cmd.Flags().StringVarP(&msg, "message", "m", "", "the parent's next message, sent with the merge; runs a turn on it (- reads stdin)")
	return cmd
}

// mergeMessage is merge's message: the words after FORK_ID or -m, not
// both; "" when neither.
func (a *app) mergeMessage(args []string, flag string) (string, error) {
	switch {
	case len(args) > 0 && flag != "":
		return "", usagef("give the message once: cast merge FORK_ID MESSAGE, or -m MESSAGE")
	case flag != "":
		args = []string{flag}
	case len(args) == 0:
		return "", nil
	}
	return a.messageArg(args, false)
}

func (a *app) handoffCmd() *cobra.Command {
	var to, model, account, device, msg string
	var dry bool
	cmd := onSession(&cobra.Command{
		Use:   "handoff [ID] --agent AGENT|same [--model M] [--account NAME] [--node NODE] [-m TEXT|-] [--dry-run]",
		Short: "Start a new session on any agent, seeded by a brief of this one (model-written, with a fallback)",
	}, sessionUse{env: "CAST_SESSION", hint: "cast handoff ID (required outside a cast session)"}, func(cmd *cobra.Command, id string, _ []string) error {
		if to == "" {
			return usagef("--agent AGENT (or same) is required")
		}
		if msg == "-" {
			b, err := readAllLimited(a.in)
			if err != nil {
				return err
			}
			msg = b
		}
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Sessions.HandoffSession(ctx, &castv1.HandoffSessionRequest{SessionId: id, ToAgent: to, Model: model,
				Node: device, Direction: msg, DryRun: dry, RequestId: ids.NewClientID(), Account: account})
			if err != nil {
				return err
			}
			if a.json {
				out := map[string]any{"source_id": id, "brief_source": resp.BriefSource, "prompt": resp.Prompt}
				if resp.Session != nil {
					out["id"], out["agent"] = resp.Session.Id, resp.Session.Agent
				}
				return a.printJSON(out)
			}
			if dry {
				fmt.Fprint(a.out, resp.Prompt)
				return nil
			}
			fmt.Fprintln(a.out, resp.Session.Id)
			fmt.Fprintf(a.errOut, "handed off %s to %s on %s (brief: %s); follow it with `cast watch %s`\n",
				id, resp.Session.Id, resp.Session.Agent, resp.BriefSource, resp.Session.Id)
			return nil
		})
	})

	cmd.Flags().StringVar(&to, "agent", "", "agent for the new session, or same")
	_ = cmd.Flags().SetAnnotation("agent", sameAgent, []string{"true"})
	// --to was this flag's name; --to names a node in migrate, and switch
	// and fork say --agent: one meaning per flag name. Scripts keep working.
	cmd.Flags().StringVar(&to, "to", "", "agent for the new session")
	_ = cmd.Flags().MarkDeprecated("to", "use --agent")
	cmd.Flags().StringVar(&model, "model", "", "model for the new session")
	cmd.Flags().StringVar(&account, "account", "", "run the new session with this named credential set (an \"accounts\" entry of the agent in the node's --agents-config)")
	cmd.Flags().StringVar(&device, "node", "", "node to run it on (default: the source's)")
	// --device was this flag's name; every other command says --node.
	cmd.Flags().StringVar(&device, "device", "", "node to run it on")
	_ = cmd.Flags().MarkDeprecated("device", "use --node")
	cmd.Flags().StringVarP(&msg, "message", "m", "", "what the new session should do next (- reads stdin)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print the first prompt and start nothing")
	return cmd
}

func readAllLimited(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	return string(b), err
}
