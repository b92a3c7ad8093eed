package cli

import (
	"context"
	"fmt"
	"io"
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
		w := &watcher{a: a, id: id, next: from}
		return w.run(cmd.Context())
	})

	cmd.Flags().Int64Var(&from, "from", 1, "replay messages from this seq first (0: only new ones)")
	return cmd
}

// watcher follows one session across reconnects: it resumes from the seq
// after the last message it printed, so nothing is shown twice or skipped.
type watcher struct {
	a    *app
	id   string
	next int64 // first seq not shown yet; 0 until known when watching only new ones
	last string
}

// watchStable: a stream that stayed up this long was working, so its end
// starts a new retry budget (as does one that delivered anything live).
const watchStable = 5 * time.Second

// errStreamEnded: the server closed the stream without an error.
var errStreamEnded = status.Error(codes.Unavailable, "watch ended by the server")

// run watches again, with backoff, each time the stream ends, resuming at
// the next seq. It gives up once the streams have not worked for
// retryBudget: counted from the last stream that delivered something live
// or stayed up, not from the last that opened (a server that ends every
// stream at once still answers each open with the replay).
func (w *watcher) run(ctx context.Context) error {
	c, err := w.a.client()
	if err != nil {
		return err
	}
	b := retry.Budget{Policy: retry.Outage}
	said := "" // what was last printed about the streams failing
	for {
		opened := time.Now()
		accepted, live, err := w.stream(ctx, c.Sessions)
		if ctx.Err() != nil {
			return nil // Ctrl-C
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
		if worked {
			said = ""
		}
		if why := w.why(err); why != said {
			said = why
			fmt.Fprintf(w.a.errOut, "cast: %s (resuming at #%d)\n", why, w.next)
		}
		pause, ok := b.Ended(time.Now(), worked)
		if !ok {
			return w.giveUp(err)
		}
		if !tick.Sleep(ctx, pause) {
			return nil
		}
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
	again := fmt.Sprintf("`cast watch %s --from %d`", w.id, max(w.next, 1))
	said, ended := endedByServer(err)
	if !ended {
		return fmt.Errorf("the control plane at %s has been unreachable for %s; run %s when it is back", w.a.addr, retryBudget, again)
	}
	if said != "" {
		said = " (" + said + ")"
	}
	return fmt.Errorf("the control plane at %s kept ending the watch for %s%s; run %s to try again", w.a.addr, retryBudget, said, again)
}

// stream runs one WatchSession call until it ends, and reports whether the
// control plane accepted it (its first event came) and whether it
// delivered anything live: a message past the replay, or a change of the
// session after its first state.
func (w *watcher) stream(ctx context.Context, sessions castv1.SessionServiceClient) (accepted, live bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: w.id, StartSeq: w.next})
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
		if err := w.show(ev); err != nil {
			return accepted, live, err
		}
	}
}

func (w *watcher) show(ev *castv1.WatchSessionResponse) error {
	if m := ev.GetMessage(); m != nil {
		if m.Seq < w.next {
			return nil // already shown before a reconnect
		}
		w.next = m.Seq + 1
	} else if s := ev.GetSession(); s != nil {
		if w.next == 0 {
			w.next = s.LastSeq + 1 // watching only new messages: they start after this
		}
		line := fmt.Sprintf("-- %s on %s (%s): %s\n", s.Id, s.Node, s.Agent, stateName(s.State))
		if line == w.last && !w.a.json {
			return nil // the same state again after a reconnect
		}
		w.last = line
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
