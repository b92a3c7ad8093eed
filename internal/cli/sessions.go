package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/validate"
)

func (a *app) newCmd() *cobra.Command {
	var agent, cwd, model, node, branch string
	cmd := &cobra.Command{
		Use:   "new --agent NAME [--cwd DIR] [--worktree BRANCH | --worktree=] [MESSAGE]",
		Short: "Start a session on an agent; prints its id",
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return usagef("--agent is required (%s)", strings.Join(agents.Names(), ", "))
			}
			if err := checkBranch(branch); err != nil {
				return err
			}
			dir, err := absDir(cwd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("worktree") {
				if err := checkWorktreeCheckout(cmd.Context(), dir); err != nil {
					return err
				}
			}
			text, err := a.messageArg(args, true)
			if err != nil {
				return err
			}
			req := &castv1.CreateSessionRequest{Agent: agent, Cwd: dir, Model: model, Node: node, Text: text, RequestId: ids.NewClientID(),
				WorktreeBranch: branch, WorktreeDefault: branch == "" && cmd.Flags().Changed("worktree")}
			sess, err := a.createSession(cmd.Context(), req)
			return a.reply(sess, err, func() error {
				fmt.Fprintln(a.out, sess.Id)
				a.saidWhere(sess, dir)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent to run: "+strings.Join(agents.Names(), ", "))
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default: the current one)")
	cmd.Flags().StringVar(&model, "model", "", "model (default: the agent's)")
	cmd.Flags().StringVar(&node, "node", "", "node to run on (default: this machine's node, the context's node:, else a node that has the folder)")
	cmd.Flags().StringVar(&branch, "worktree", "", "run the session in its own git worktree on this branch (made from the checkout at --cwd; --worktree= names it cast/<title-slug>--<id>)")
	return cmd
}

func (a *app) sendCmd() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "send ID MESSAGE",
		Short: "Send a message to a session (MESSAGE - reads stdin)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" && len(args) < 2 {
				return usagef("cast send ID MESSAGE: name the session and the message; `cast ls` lists sessions")
			}
			id, args, err := sessionArg(id, args, anyRest, "", "cast send ID MESSAGE; `cast ls` lists sessions")
			if err != nil {
				return err
			}
			text, err := a.messageArg(args, false)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			req := &castv1.SendMessageRequest{SessionId: id, Text: text, RequestId: ids.NewClientID()}
			resp, err := retried(a, cmd.Context(), func(ctx context.Context) (*castv1.SendMessageResponse, error) {
				return c.Sessions.SendMessage(ctx, req)
			})
			if err != nil {
				return err
			}
			if resp.Node == "" {
				fmt.Fprintf(a.errOut, "cast: warning: no node is connected; the message is stored (#%d) and runs once a node connects and takes %s\n", resp.Message.Seq, id)
			}
			if !resp.NodeConnected && resp.Node != "" {
				fmt.Fprintf(a.errOut, "cast: warning: node %s is down; the message is stored (#%d) and runs when %s is back (`cast nodes`; `cast drain %s --skip-worktree` moves its sessions)\n",
					resp.Node, resp.Message.Seq, resp.Node, resp.Node)
			}
			if a.json {
				return a.printJSON(raw(resp.Message))
			}
			fmt.Fprintf(a.out, "sent #%d to %s\n", resp.Message.Seq, id)
			fmt.Fprintf(a.errOut, "follow it with `cast watch %s`\n", id)
			return nil
		},
	}
	sessionFlag(cmd, &id)
	return cmd
}

func (a *app) readCmd() *cobra.Command {
	cmd := onSession(&cobra.Command{
		Use:   "read ID [FROM:TO]",
		Short: "Print a session's messages, optionally a 1-based seq range like 87:106",
	}, sessionUse{rest: 1, hint: "cast read ID [FROM:TO]; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, args []string) error {
		from, to := int64(0), int64(0)
		if len(args) == 1 {
			var err error
			if from, to, err = parseRange(args[0]); err != nil {
				return err
			}
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		var all []*castv1.Message
		read := 0
		err = c.EachMessage(cmd.Context(), a.timeout, &castv1.ListMessagesRequest{SessionId: id, StartSeq: from, EndSeq: to}, func(m *castv1.Message) error {
			read++
			if a.json {
				all = append(all, m)
			} else {
				fmt.Fprint(a.out, a.forScreen(formatMessage(m)))
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Seqs are dense: a range that starts inside the session reads
		// at least one message, so nothing read means it starts past
		// the end (the control plane answers that with an empty page).
		if read == 0 && from > 0 {
			if err := a.readPastTheEnd(cmd.Context(), c, id, args[0]); err != nil {
				return err
			}
		}
		if a.json {
			return a.printJSON(map[string]any{"session_id": id, "messages": raws(all)})
		}
		return nil
	})

	return cmd
}

// readPastTheEnd refuses the range given (which read nothing) when it
// starts past the end of session id, rather than print nothing and exit
// 0 as if those messages were empty.
func (a *app) readPastTheEnd(parent context.Context, c *client.Client, id, given string) error {
	ctx, cancel := a.ctx(parent)
	defer cancel()
	sess, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: id})
	if err != nil {
		return err
	}
	if sess.LastSeq == 0 {
		return pastTheEnd("range "+given, id, 0, fmt.Sprintf("`cast watch %s` follows its messages as they come", id))
	}
	return pastTheEnd("range "+given, id, sess.LastSeq, fmt.Sprintf("read within 1:%d, e.g. `cast read %s 1:%d`", sess.LastSeq, id, sess.LastSeq))
}

// pastTheEnd is the one refusal of a seq past the end of session id,
// whose last seq is last (seqs are dense: it holds last messages): given
// is what was asked, in the words it was given (--from-seq 99, range
// 5:9), and instead what to give. `cast watch --from-seq` and `cast read`
// say it alike.
func pastTheEnd(given, id string, last int64, instead string) error {
	holds := "no messages yet"
	switch {
	case last == 1:
		holds = "1 message (its last seq is 1)"
	case last > 1:
		holds = fmt.Sprintf("%d messages (its last seq is %d)", last, last)
	}
	return usagef("%s is past the end of %s: it holds %s; %s", given, id, holds, instead)
}

// parseRange reads "A:B", "A:", ":B" or "A" (1-based, inclusive).
func parseRange(s string) (int64, int64, error) {
	bad := usagef("range %q is not FROM:TO with 1-based seqs, e.g. 87:106", s)
	lo, hi, found := strings.Cut(s, ":")
	parse := func(p string) (int64, error) {
		if p == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 1 {
			return 0, bad
		}
		return n, nil
	}
	from, err := parse(lo)
	if err != nil {
		return 0, 0, err
	}
	to := from
	if found {
		if to, err = parse(hi); err != nil {
			return 0, 0, err
		}
	}
	if from == 0 && to == 0 || (to != 0 && from > to) {
		return 0, 0, bad
	}
	return from, to, nil
}

// messageArg joins args into the message; "-" reads stdin.
func (a *app) messageArg(args []string, optional bool) (string, error) {
	text := strings.Join(args, " ")
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(a.in, 16<<20))
		if err != nil {
			return "", err
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" && !optional {
		return "", usagef("the message is empty; say something, or pass - to read it from stdin")
	}
	return text, checkText(text)
}

func absDir(dir string) (string, error) {
	if dir == "" {
		return os.Getwd()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := validate.Check(validate.Cwd, "--cwd", abs); err != nil {
		return "", usageError{err}
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", usagef("--cwd %s is not a directory", dir)
	}
	return abs, nil
}

// fromHere names this machine's node (the context's node:) as where a
// session made without --node goes, when it can (placement.Place), and
// says the folder is this machine's: a --node is asked for its path for it.
func (a *app) fromHere(req *castv1.CreateSessionRequest) {
	if req.Node == "" {
		req.OriginNode = a.cc.Node
	}
	req.CwdOnCaller = req.Cwd != ""
}

// saidWhere tells where a new session went (stderr: stdout holds only its
// id, or exec's answer), with the node's folder when the node maps it
// elsewhere. cast new and cast exec both say it.
func (a *app) saidWhere(sess *castv1.Session, dir string) {
	if sess.Cwd != dir {
		fmt.Fprintf(a.errOut, "session %s on node %s in %s\n", sess.Id, sess.Node, sess.Cwd)
		return
	}
	fmt.Fprintf(a.errOut, "session %s on node %s\n", sess.Id, sess.Node)
}

// retryBudget is how long a mutating call (or a watch) keeps retrying
// while the control plane is away: retry.Outage's limit, said in messages.
var retryBudget = retry.Outage.Limit

// retry runs a mutating call with the same request id, with backoff
// (retry.Outage), while the outcome is unknown (unreachable or timed out)
// and the budget lasts, so a control plane restart mid-request neither
// loses nor duplicates it.
func (a *app) retry(parent context.Context, call func(context.Context) error) error {
	var outage time.Time // when the call first met an unreachable control plane
	return retry.Do(parent, retry.Outage, func() error {
		ctx, cancel := a.ctx(parent)
		err := call(ctx)
		cancel()
		if unknownOutcome(err) && outage.IsZero() {
			outage = time.Now()
		}
		if err != nil && !unknownOutcome(err) && !nodesNotBackYet(err, outage) {
			return retry.Stop(err)
		}
		return err
	}, nil)
}

// retried is a.retry for a call that answers: the answer of the attempt
// that settled it (send, new, spawn and fork keep their request id across
// attempts).
func retried[T any](a *app, parent context.Context, call func(context.Context) (T, error)) (T, error) {
	var resp T
	err := a.retry(parent, func(ctx context.Context) (err error) {
		resp, err = call(ctx)
		return err
	})
	return resp, err
}

// nodeReconnectGrace is how long after an outage a "no node" refusal is
// retried: a control plane that just restarted has not heard from its nodes
// yet (they reconnect within a second or two), so a call that rode out the
// restart would otherwise be refused for a node that is on its way back.
const nodeReconnectGrace = 10 * time.Second

// nodesNotBackYet: err refuses the call for want of a node, and the call met
// an outage (since outage) recently enough that the nodes may be reconnecting.
func nodesNotBackYet(err error, outage time.Time) bool {
	return !outage.IsZero() && time.Since(outage) < nodeReconnectGrace && client.ReasonOf(err) == errs.ReasonNoNode
}

// unknownOutcome: the request may or may not have been applied.
func unknownOutcome(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

func (a *app) interruptCmd() *cobra.Command {
	cmd := onSession(&cobra.Command{
		Use:   "interrupt ID",
		Short: "Stop a session's running turn (its whole process group)",
	}, sessionUse{hint: "cast interrupt ID; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: id})
			return a.replyAs(err, func() any {
				return map[string]any{"id": id, "delivered": resp.Delivered, "idle": resp.Idle}
			}, func() error {
				if resp.Idle {
					fmt.Fprintf(a.out, "nothing to stop: %s is not running a turn\n", id)
					return nil
				}
				if !resp.Delivered {
					fmt.Fprintf(a.out, "interrupt recorded, but the node running %s is not connected\n", id)
					fmt.Fprintln(a.errOut, "`cast node ls` shows it")
					return nil
				}
				fmt.Fprintf(a.out, "interrupt sent to %s\n", id)
				return nil
			})
		})
	})

	return cmd
}

// createSession creates a session, retrying with the same request id while
// the outcome is unknown.
func (a *app) createSession(parent context.Context, req *castv1.CreateSessionRequest) (*castv1.Session, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	a.fromHere(req)
	return retried(a, parent, func(ctx context.Context) (*castv1.Session, error) {
		return c.Sessions.CreateSession(ctx, req)
	})
}
