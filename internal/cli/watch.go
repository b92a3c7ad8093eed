package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func (a *app) watchCmd() *cobra.Command {
	var from int64
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a session's messages and state as they happen (Ctrl-C to stop); rides out control plane restarts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := &watcher{a: a, id: args[0], next: from}
			return w.run(cmd.Context())
		},
	}
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

func (w *watcher) run(ctx context.Context) error {
	c, err := w.a.client()
	if err != nil {
		return err
	}
	lost := time.Time{} // when the stream last failed; zero while it works
	pause := 250 * time.Millisecond
	for {
		err := w.stream(ctx, c.Sessions, func() { lost, pause = time.Time{}, 250*time.Millisecond })
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		// Canceled while our own context is live is the server ending the
		// stream as it stops: like Unavailable, watch again.
		if c := status.Code(err); err != nil && c != codes.Unavailable && c != codes.Canceled {
			return err
		}
		if lost.IsZero() {
			lost = time.Now()
			fmt.Fprintf(w.a.errOut, "cast: lost the control plane; reconnecting (resuming at #%d)\n", w.next)
		}
		if time.Since(lost) > retryBudget {
			return fmt.Errorf("the control plane at %s has been unreachable for %s; run `cast watch %s --from %d` when it is back",
				w.a.addr, retryBudget, w.id, max(w.next, 1))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// stream runs one WatchSession call; connected is called once events flow.
// A stream the server ends (it is shutting down) is reported as Unavailable.
func (w *watcher) stream(ctx context.Context, sessions castv1.SessionServiceClient, connected func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: w.id, StartSeq: w.next})
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		ev, err := s.Recv()
		if err == io.EOF {
			return status.Error(codes.Unavailable, "watch ended by the server")
		}
		if err != nil {
			return err
		}
		if first {
			connected()
		}
		if err := w.show(ev); err != nil {
			return err
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
