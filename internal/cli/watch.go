package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/tick"
)

func (a *app) watchCmd() *cobra.Command {
	var from int64
	cmd := onSession(&cobra.Command{
		Use:   "watch ID",
		Short: "Follow a session's messages and state as they happen (Ctrl-C to stop); rides out control plane restarts",
	}, sessionUse{hint: "cast watch ID; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		if from < 0 {
			return usagef("--from-seq must be 0 (only new messages) or a seq (1-based)")
		}
		w := &watcher{a: a}
		w.rw = resumingWatch{id: id, next: from, ended: w.ended, giveUp: w.giveUp}
		err := w.run(cmd.Context())
		// The control plane names its field (start_seq); people gave
		// --from-seq (still where the watch starts: nothing was shown yet).
		if last, perr := strconv.ParseInt(client.MetadataOf(err, "last_seq"), 10, 64); perr == nil && status.Code(err) == codes.InvalidArgument && w.rw.next == from {
			return pastTheEnd(fmt.Sprintf("--from-seq %d", from), id, last, fmt.Sprintf("give --from-seq %d at most, or --from-seq 0 for only new messages", last+1))
		}
		return err
	})

	cmd.Flags().Int64Var(&from, "from-seq", 1, "replay messages from this seq first (0: only new ones)")
	// --from was this flag's name; --from names a node in migrate start:
	// one meaning per flag name. Scripts keep working.
	cmd.Flags().Int64Var(&from, "from", 1, "replay messages from this seq first")
	_ = cmd.Flags().MarkDeprecated("from", "use --from-seq")
	return cmd
}

// watcher is `cast watch`: what it printed last, and what it said about
// the streams failing, across the reconnects rw rides out.
type watcher struct {
	a    *app
	rw   resumingWatch
	last string
	said string // what was last printed about the streams failing
}

// watchStable: a stream that stayed up this long was working, so its end
// starts a new retry budget (as does one that delivered anything live).
const watchStable = 5 * time.Second

// errStreamEnded: the server closed the stream without an error.
var errStreamEnded = status.Error(codes.Unavailable, "watch ended by the server")

// resumingWatch follows one session across stream ends: a control plane
// that stops (or is lost) ends a watch, not the session, so it watches
// again from the seq after the last message it got, and nothing is handed
// on twice or skipped. It gives up once the streams have not worked for
// retryBudget: counted from the last stream that delivered something live
// or stayed up, not from the last that opened (a server that ends every
// stream at once still answers each open with the replay).
type resumingWatch struct {
	sessions castv1.SessionServiceClient
	id       string
	next     int64 // first seq not handed on yet; 0 until known when watching only new ones
	// ended, if set, hears of each stream end ridden out, and whether
	// that stream worked (it then starts a new budget).
	ended func(err error, worked bool)
	// giveUp, if set, says why the budget ran out; else the last
	// stream's error does.
	giveUp func(err error) error
}

// follow hands each event to on until on is done (nil), on fails, a
// stream ends in a way watching again cannot help, the budget runs out or
// ctx ends (the caller, knowing its context, says why).
func (rw *resumingWatch) follow(ctx context.Context, on func(*castv1.WatchSessionResponse) (done bool, err error)) error {
	b := retry.Budget{Policy: retry.Outage}
	for {
		opened := time.Now()
		accepted, live, err := rw.stream(ctx, on)
		if err == nil || ctx.Err() != nil {
			return err
		}
		// Canceled while our own context is live is the server ending the
		// stream as it stops: like Unavailable, watch again. So is an ID
		// token lapsing under a stream it opened: the next stream gets a
		// new one (a context's token-command runs again).
		lapsed := accepted && client.ReasonOf(err) == errs.ReasonOIDCExpired
		if c := status.Code(err); c != codes.Unavailable && c != codes.Canceled && !lapsed {
			return err
		}
		worked := live || time.Since(opened) >= watchStable
		if rw.ended != nil {
			rw.ended(err, worked)
		}
		pause, ok := b.Ended(time.Now(), worked)
		switch {
		case !ok && rw.giveUp != nil:
			return rw.giveUp(err)
		case !ok:
			return err
		}
		if !tick.Sleep(ctx, pause) {
			return ctx.Err()
		}
	}
}

// stream runs one WatchSession call from next until it ends (an error) or
// on is done (nil), and reports whether the control plane accepted it (its
// first event came) and whether it delivered anything live: a message past
// the replay, or a change of the session after its first state.
func (rw *resumingWatch) stream(ctx context.Context, on func(*castv1.WatchSessionResponse) (bool, error)) (accepted, live bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := rw.sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: rw.id, StartSeq: rw.next})
	if err != nil {
		return false, false, err
	}
	replayed := int64(-1) // the session's last seq when the stream opened
	for {
		ev, err := s.Recv()
		accepted = accepted || err == nil
		if err == io.EOF {
			return accepted, live, errStreamEnded
		}
		if err != nil {
			return accepted, live, err
		}
		switch {
		case replayed < 0 && ev.GetSession() != nil:
			replayed = ev.GetSession().LastSeq
		case ev.GetSession() != nil, ev.GetMessage().GetSeq() > replayed:
			live = true
		}
		if m := ev.GetMessage(); m != nil {
			if m.Seq < rw.next {
				continue // already handed on before a reconnect
			}
			rw.next = m.Seq + 1
		} else if s := ev.GetSession(); s != nil && rw.next == 0 {
			rw.next = s.LastSeq + 1 // watching only new messages: they start after this
		}
		if done, err := on(ev); done || err != nil {
			return accepted, live, err
		}
	}
}

// run follows the session until Ctrl-C or until the control plane has not
// worked for the retry budget.
func (w *watcher) run(ctx context.Context) error {
	c, err := w.a.client()
	if err != nil {
		return err
	}
	w.rw.sessions = c.Sessions
	err = w.rw.follow(ctx, func(ev *castv1.WatchSessionResponse) (bool, error) { return false, w.show(ev) })
	if ctx.Err() != nil {
		return nil // Ctrl-C
	}
	return err
}

// ended says on stderr why the watch is resuming, once while the streams
// keep failing the same way.
func (w *watcher) ended(err error, worked bool) {
	if worked {
		w.said = ""
	}
	if why := w.why(err); why != w.said {
		w.said = why
		fmt.Fprintf(w.a.errOut, "cast: %s (resuming at #%d)\n", why, w.rw.next)
	}
}

// why says what ended a stream: the control plane's own words when it
// ended it, else that it was lost.
func (w *watcher) why(err error) string {
	said, ended := endedByServer(err)
	switch {
	case !ended:
		return "lost the control plane; reconnecting"
	case said == "":
		return "the control plane ended the watch; watching again"
	}
	return "the control plane ended the watch: " + said + "; watching again"
}

// endedByServer reports whether the control plane itself ended a stream
// (a status carrying its reason, or a clean close) rather than the stream
// being lost (the connection broke, the server went away), and what it
// said.
func endedByServer(err error) (said string, ended bool) {
	switch {
	case err == errStreamEnded:
		return "", true
	case client.ReasonOf(err) != "":
		return status.Convert(err).Message(), true
	}
	return "", false
}

func (w *watcher) giveUp(err error) error {
	again := fmt.Sprintf("`cast watch %s --from-seq %d`", w.rw.id, max(w.rw.next, 1))
	said, ended := endedByServer(err)
	if !ended {
		return fmt.Errorf("the control plane at %s has been unreachable for %s; run %s when it is back", w.a.addr, retryBudget, again)
	}
	if said != "" {
		said = " (" + said + ")"
	}
	return fmt.Errorf("the control plane at %s kept ending the watch for %s%s; run %s to try again", w.a.addr, retryBudget, said, again)
}

// show prints an event; a state printed already (before a reconnect) is
// not printed again.
func (w *watcher) show(ev *castv1.WatchSessionResponse) error {
	if s := ev.GetSession(); s != nil {
		line := fmt.Sprintf("-- %s on %s (%s): %s\n", s.Id, s.Node, s.Agent, stateName(s.State))
		if line == w.last && !w.a.json {
			return nil
		}
		w.last = line
	}
	if w.a.yaml {
		return w.a.printJSON(raw(ev)) // a YAML stream, a document an event
	}
	if w.a.json {
		_, err := fmt.Fprintln(w.a.out, string(raw(ev)))
		return err
	}
	if m := ev.GetMessage(); m != nil {
		_, err := fmt.Fprint(w.a.out, w.a.forScreen(formatMessage(m)))
		return err
	}
	_, err := fmt.Fprint(w.a.out, w.a.forScreen(w.last))
	return err
}
