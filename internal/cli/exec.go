package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/transcript"
)

// interrupted is a command stopped by Ctrl-C (or SIGTERM), or a `cast
// exec` whose turn someone else interrupted: exit 130, as a shell's
// command killed by SIGINT.
type interrupted struct{ error }

// execInterrupted stops the turn an interrupted `cast exec` was waiting
// on for its prompt at seq (a one-shot turn has no one left to read it)
// and says what became of it.
func (a *app) execInterrupted(c *client.Client, id string, seq int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), min(a.timeout, 5*time.Second))
	defer cancel()
	resp, err := c.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: id})
	switch {
	case err != nil || !resp.Delivered && !resp.Idle:
		return interrupted{fmt.Errorf("interrupted; session %s's turn may still run: stop it with `cast interrupt %s`", id, id)}
	case resp.Idle:
		if s := parkedHolding(ctx, c, id, seq); s != nil {
			// Nothing ran, so nothing was stopped: the parked prompt runs
			// when the fleet's next credential reaches the node (a session
			// on its own account takes none), exec or no exec; only an
			// archive keeps it from running.
			fleet := ""
			if s.Account == "" {
				fleet = fmt.Sprintf("when a fleet credential arrives (`cast account use NAME --agent %s`), ", s.Agent)
			}
			return interrupted{fmt.Errorf("interrupted; session %s is parked on a usage limit and holds the prompt, which nothing stopped: "+
				"it runs %swith the next message, or on another agent after `cast switch %s --agent A` (`cast watch %s` follows it); "+
				"`cast rm %s` keeps it from running", id, fleet, id, id, id)}
		}
		return interrupted{fmt.Errorf("interrupted; session %s's turn had ended (`cast read %s` shows its answer)", id, id)}
	}
	return interrupted{fmt.Errorf("interrupted; stopped session %s's turn (`cast read %s` shows what it wrote)", id, id)}
}

// parkedHolding is session id when it is parked on a usage limit holding
// the prompt at seq; nil otherwise, or when it cannot be read.
func parkedHolding(ctx context.Context, c *client.Client, id string, seq int64) *castv1.Session {
	s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: id})
	if err != nil || s.State != castv1.SessionState_SESSION_STATE_PARKED || s.HeldSeq < seq {
		return nil
	}
	return s
}

// execExit carries the agent's exit code out of a command.
type execExit struct{ code int }

func (e execExit) Error() string { return fmt.Sprintf("the agent exited with %d", e.code) }

type execOpts struct {
	agent, model, resume, cwd string
	dryRun, chain             bool
	jobs                      int
	wait                      time.Duration
}

func (a *app) execCmd() *cobra.Command {
	var o execOpts
	cmd := &cobra.Command{
		Use:   "exec [--agent A] [--model M] [--dry-run] [--resume ID] [-j N] [--chain] PROMPT...",
		Short: "Run prompts one-shot on an agent and print the answers; the exit code is the agent's",
		Long: "Each PROMPT runs as its own one-shot turn on a node (hidden from `cast ls`). Piped stdin is added\n" +
			"to the first prompt (or is the prompt). -j runs prompts in parallel; --chain feeds each answer into\n" +
			"the next prompt; --resume sends the prompts to an existing session instead.",
		RunE: func(cmd *cobra.Command, args []string) error {
			prompts, err := a.execPrompts(args)
			if err != nil {
				return err
			}
			switch {
			case o.jobs < 1:
				return usagef("-j must be at least 1")
			case o.chain && o.jobs > 1:
				return usagef("--chain runs steps one after another; drop -j")
			case o.wait <= 0:
				// It would expire before the first call and read as the
				// control plane not answering.
				return usagef("--wait must be more than 0, e.g. 10m")
			}
			if o.cwd, err = absDir(o.cwd); err != nil {
				return err
			}
			if o.dryRun {
				return a.execDryRun(cmd.Context(), o, prompts)
			}
			return a.execRun(cmd.Context(), o, prompts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.agent, "agent", "claude", "agent to run")
	f.StringVar(&o.model, "model", "", "model")
	f.StringVar(&o.resume, "resume", "", "send the prompts to this session instead of new one-shot sessions")
	f.StringVar(&o.cwd, "cwd", "", "working directory (default: the current one)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the exact command line the node would run, and run nothing")
	f.BoolVar(&o.chain, "chain", false, "pipe each step's answer into the next prompt")
	f.IntVarP(&o.jobs, "jobs", "j", 1, "prompts to run in parallel")
	f.DurationVar(&o.wait, "wait", 10*time.Minute, "give up on a turn after this long")
	return cmd
}

// execPrompts are the positional prompts, with piped stdin added.
func (a *app) execPrompts(args []string) ([]string, error) {
	prompts := append([]string{}, args...)
	if f, ok := a.in.(*os.File); ok && !term.IsTerminal(int(f.Fd())) {
		b, err := io.ReadAll(io.LimitReader(f, 16<<20))
		if err != nil {
			return nil, err
		}
		if in := strings.TrimSpace(string(b)); in != "" {
			if len(prompts) == 0 {
				prompts = []string{in}
			} else {
				prompts[0] += "\n\n" + in
			}
		}
	}
	if len(prompts) == 0 {
		return nil, usagef("give a prompt, or pipe one into stdin")
	}
	for _, p := range prompts {
		if strings.TrimSpace(p) == "" {
			return nil, usagef("a prompt is empty")
		}
		if err := checkText(p); err != nil {
			return nil, err
		}
	}
	return prompts, nil
}

func (a *app) execRun(ctx context.Context, o execOpts, prompts []string) error {
	answers := make([]string, len(prompts))
	codes := make([]int, len(prompts))
	errs := make([]error, len(prompts))
	if o.chain {
		prev := ""
		for i, p := range prompts {
			if prev != "" {
				p += "\n\n" + prev
			}
			answers[i], codes[i], errs[i] = a.execOne(ctx, o, p)
			if errs[i] != nil || codes[i] != 0 {
				break
			}
			prev = answers[i]
		}
		// A chain prints its last step that ran (a failed step ends it).
		last := 0
		for i := range prompts {
			if answers[i] != "" || errs[i] != nil || codes[i] != 0 {
				last = i
			}
		}
		answers, codes, errs = answers[last:last+1], codes[last:last+1], errs[last:last+1]
	} else {
		// The client is made once, here: the jobs below would each make
		// it at once (a data race on a.cli, and one connection per job).
		if _, err := a.client(); err != nil {
			return err
		}
		sem := make(chan struct{}, o.jobs)
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				answers[i], codes[i], errs[i] = a.execOne(ctx, o, p)
			}()
		}
		wg.Wait()
	}
	worst := 0
	for i := range answers {
		if errs[i] != nil {
			return errs[i]
		}
		if a.json {
			_ = a.printJSON(map[string]any{"answer": answers[i], "exit_code": codes[i]})
		} else {
			fmt.Fprintln(a.out, answers[i])
		}
		if codes[i] != 0 && worst == 0 {
			worst = codes[i]
		}
	}
	if worst != 0 {
		return execExit{worst}
	}
	return nil
}

// execOne runs one prompt and returns the answer and the agent's exit code.
func (a *app) execOne(parent context.Context, o execOpts, prompt string) (string, int, error) {
	c, err := a.client()
	if err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(parent, o.wait)
	defer cancel()
	t, err := a.execSend(ctx, c, o, prompt)
	if err != nil {
		return "", 0, err
	}
	// A control plane that stops (or is lost) ends the watch, not the
	// turn: exec watches again from the next seq, as cast watch does.
	rw := resumingWatch{sessions: c.Sessions, id: t.id, next: t.seq + 1}
	err = rw.follow(ctx, func(ev *castv1.WatchSessionResponse) (bool, error) {
		return t.see(ev, rw.next-1), nil
	})
	switch {
	case err == nil:
	case parent.Err() != nil:
		return "", 0, a.execInterrupted(c, t.id, t.seq)
	case ctx.Err() != nil:
		return "", 0, fmt.Errorf("no answer from session %s within --wait %s; follow it with `cast watch %s`", t.id, o.wait, t.id)
	default:
		return "", 0, err
	}
	if t.end.LastTurnInterrupted {
		// Someone else stopped it (`cast interrupt`, a switch): the answer
		// is partial, and a script must not take it for one.
		return "", 0, interrupted{fmt.Errorf("session %s's turn was interrupted (`cast interrupt` or a switch); `cast read %s` shows what it wrote", t.id, t.id)}
	}
	code := int(t.end.LastExitCode)
	if t.end.State == castv1.SessionState_SESSION_STATE_FAILED {
		if code <= 0 {
			code = 1
		}
		fmt.Fprintf(a.errOut, "cast: session %s failed: %s\n", t.id, t.end.StateReason)
	}
	return strings.Join(t.answer, "\n"), code, nil
}

// execSend starts the turn: a new one-shot session with the prompt, or
// the prompt sent to the session --resume names.
func (a *app) execSend(ctx context.Context, c *client.Client, o execOpts, prompt string) (*execTurn, error) {
	if o.resume == "" {
		req := &castv1.CreateSessionRequest{Agent: o.agent, Model: o.model, Cwd: o.cwd, Hidden: true, Text: prompt, RequestId: ids.NewClientID()}
		a.fromHere(req)
		sess, err := c.Sessions.CreateSession(ctx, req)
		if err != nil {
			return nil, err
		}
		if !a.json {
			a.saidWhere(sess, o.cwd) // as cast new says it: stdout holds only the answer
		}
		return &execTurn{id: sess.Id, seq: 1}, nil
	}
	prev, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: o.resume})
	if err != nil {
		return nil, err
	}
	resp, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: o.resume, Text: prompt, RequestId: ids.NewClientID()})
	if err != nil {
		return nil, err
	}
	return &execTurn{id: o.resume, seq: resp.Message.Seq, earlier: prev.UpdateTime, from: prev.DeliveredSeq}, nil
}

// execTurn is one exec turn as its session's events tell it.
type execTurn struct {
	id  string
	seq int64 // the prompt's
	// A resumed session may show an earlier turn's failure until the node
	// starts this one: that record (its update time) ends no turn here.
	earlier *timestamppb.Timestamp
	// from is the session's delivery cursor before the prompt was sent:
	// a failure that moved it, short of the prompt, dropped an earlier
	// turn's prompt.
	from    int64
	running bool
	answer  []string
	seqs    []int64 // answer's seqs
	// before is the last seq of an earlier turn that ended after the
	// prompt was sent (the session was running one): its answers are not
	// this prompt's.
	before int64
	// The session comes before the messages it counts (a watch sends it
	// first, then replays from start_seq; so does a catch-up), so the
	// turn's end is kept until the messages through its last seq are in.
	end *castv1.Session
}

// see takes in an event, got being the last seq received, and says
// whether the turn has ended with its whole answer in.
func (t *execTurn) see(ev *castv1.WatchSessionResponse, got int64) bool {
	// A slash command the agent ran itself answers with its output (a
	// command_output notice), often with no model call at all.
	if m := ev.GetMessage(); m != nil && (m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT ||
		m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType == transcript.NoticeCommandOutput) && m.Seq > t.before {
		t.answer, t.seqs = append(t.answer, m.Text), append(t.seqs, m.Seq)
	}
	if s := ev.GetSession(); s != nil && t.end == nil {
		if s.LastTurnAbandoned {
			// A move (or its node cut off, or stopping) stopped the turn, and
			// its prompt runs again, on the destination after a move: that
			// turn answers, from the start.
			t.running, t.answer, t.seqs = false, nil, nil
			return false
		}
		switch s.State {
		case castv1.SessionState_SESSION_STATE_RUNNING:
			t.running = true
		case castv1.SessionState_SESSION_STATE_FAILED, castv1.SessionState_SESSION_STATE_IDLE:
			if earlierTurnEnd(s, t.seq, t.from) {
				// A turn that ran when the prompt was sent ended; the
				// prompt runs in a later one (the delivery cursor moves
				// past it as that turn starts and ends).
				t.earlierTurn(s.LastSeq)
				break
			}
			stale := s.State == castv1.SessionState_SESSION_STATE_FAILED && t.earlier != nil && proto.Equal(s.UpdateTime, t.earlier)
			if t.running || s.LastSeq > t.seq || s.State == castv1.SessionState_SESSION_STATE_FAILED && s.StateReason != "" && !stale {
				t.end = s
			}
		}
	}
	return t.end != nil && got >= t.end.LastSeq
}

// earlierTurnEnd says whether s, a turn's end, ends a turn earlier than
// the prompt at seq (one under way when it was sent, the delivery cursor
// then at from): idle with the delivery cursor short of the prompt,
// failed holding only messages before it (held seq), or failed dropping
// its own prompt, which moved the cursor past from but short of the
// prompt; the next turn runs the prompt. A failure that neither holds
// nor moved the cursor (reported by a node older than held seq) is taken
// for the prompt's, as before.
func earlierTurnEnd(s *castv1.Session, seq, from int64) bool {
	switch s.State {
	case castv1.SessionState_SESSION_STATE_IDLE:
		return s.DeliveredSeq < seq
	case castv1.SessionState_SESSION_STATE_FAILED:
		if s.HeldSeq != 0 {
			return max(s.HeldSeq, s.DeliveredSeq) < seq
		}
		return from < s.DeliveredSeq && s.DeliveredSeq < seq
	}
	return false
}

// earlierTurn leaves out what an earlier turn, which ended at seq last,
// answered: the watch may have sent some of it before its end.
func (t *execTurn) earlierTurn(last int64) {
	t.running, t.before = false, max(t.before, last)
	i := 0
	for i < len(t.seqs) && t.seqs[i] <= t.before {
		i++
	}
	t.answer, t.seqs = t.answer[i:], t.seqs[i:]
}

// shellJoin quotes argv for display (it is never run through a shell).
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, s := range argv {
		if s != "" && strings.IndexFunc(s, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '@' ||
				(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
		}) < 0 {
			out[i] = s
			continue
		}
		out[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
