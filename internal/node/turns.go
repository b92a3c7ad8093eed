package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/validate"
	"github.com/cast-dev/cast/internal/wire"
)

// interruptedUnheld ends an interrupted turn whose native session does not
// hold the prompt. The turn is done (an interrupt is not retried), so the
// prompt counts as delivered; the native session's KnownUpto stays below
// it, so the agent's next turn carries it (a delta, or a rebuild) exactly
// once. A native session that took some of the turn without the prompt,
// or that could not be read to tell, is rebuilt instead. A migration
// notice the prompt carried is told again.
func (a *Daemon) interruptedUnheld(ctx context.Context, sessionID string, o owned, res runner.Result) {
	err := a.st.session(sessionID, func(s *owned) {
		s.DeliveredSeq = max(s.DeliveredSeq, o.ReceivedSeq)
		s.Parked = false
		if ns := s.Native[o.Agent]; ns != nil && (res.Emitted > 0 || res.NativeUnread) {
			ns.Stale = true
		}
	})
	if err != nil {
		// Memory holds the outcome until recordAgain writes it (a full
		// disk), as for a completed turn: the control plane hears it now,
		// or the session showed running with no process.
		a.lg.Warn("turn's outcome not written to the node's state yet", zap.String("session", sessionID), zap.Error(err))
	}
	a.reportInterrupted(ctx, sessionID, res.ExitCode, fleetCred{}, nil)
}

// failTurn ends a turn whose prompt the agent did not take. The prompt is
// never bundled with later messages (one the agent cannot take would fail
// every turn after it): a notice in the thread says which messages were
// not delivered and why, a rebuild of the native session leaves them out
// (withoutUndelivered), and the next message runs without them.
func (a *Daemon) failTurn(ctx context.Context, sessionID string, o owned, reason string, exitCode int) error {
	a.markFailed(sessionID, o, failDropped)
	if o.ReceivedSeq > o.DeliveredSeq {
		a.noteUndelivered(ctx, sessionID, o, reason)
	}
	a.report(ctx, sessionID, o, castv1.SessionState_SESSION_STATE_FAILED, reason, exitCode)
	return errors.New(reason)
}

// holdTurn ends a turn that failed before the agent could see its prompt
// (the CLI is not installed or not logged in on this node, or the node could
// not set the turn up: no local checkout, a worktree that could not be made). The prompt was
// not refused, so it is not dropped: once the node is fixed, the next message
// carries it, as the user sent it. The session shows failed with the reason,
// which says what to run.
func (a *Daemon) holdTurn(ctx context.Context, sessionID string, o owned, reason string, exitCode int) error {
	return a.holdAs(ctx, failHeld, sessionID, o, reason, exitCode)
}

// holdAs is holdTurn recording the turn as how says (failHeld or
// failKilled).
func (a *Daemon) holdAs(ctx context.Context, how failMark, sessionID string, o owned, reason string, exitCode int) error {
	a.markFailed(sessionID, o, how)
	a.report(ctx, sessionID, o, castv1.SessionState_SESSION_STATE_FAILED, reason, exitCode)
	return errors.New(reason)
}

// failMark is how markFailed records a failed turn's prompt.
type failMark int

const (
	failDropped failMark = iota // not taken by the agent: the delivery cursor moves past it
	failHeld                    // kept for the next message
	failKilled                  // kept for the next message, or the node's next start (owned.Killed)
)

// markFailed records a failed turn as how says.
func (a *Daemon) markFailed(sessionID string, o owned, how failMark) {
	_ = a.st.session(sessionID, func(s *owned) {
		s.FailedSeq, s.Killed = o.ReceivedSeq, how == failKilled
		if how == failDropped {
			s.DeliveredSeq = max(s.DeliveredSeq, o.ReceivedSeq)
		}
		// The CLI may have written the refused prompt into its native
		// session; resuming it would send that prompt again, so the next
		// turn rebuilds it from the neutral copy (same native id, except Codex
		// and the user's own home: see rebuildNativeID).
		if ns := s.Native[o.Agent]; ns != nil {
			ns.Stale = true
		}
	})
}

// undeliveredPrefix starts the client id of an undelivered notice; the
// seq range it covers follows ("undelivered.5-6").
const undeliveredPrefix = "undelivered."

// noteUndelivered stores the notice that messages after o.DeliveredSeq up
// to o.ReceivedSeq never reached the agent. A notice that cannot be stored
// is logged: the messages are still dropped from the next prompt.
func (a *Daemon) noteUndelivered(ctx context.Context, sessionID string, o owned, reason string) {
	from, to := o.DeliveredSeq+1, o.ReceivedSeq
	ag, _ := agents.Lookup(o.Agent)
	text := fmt.Sprintf("Not delivered to %s: %s. The next message runs without it; send it again to retry.", ag.DisplayName, reason)
	msg := &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeUndelivered,
		Text: clipReason(text), Agent: o.Agent, ClientId: fmt.Sprintf("%s%d-%d", undeliveredPrefix, from, to)}
	if _, err := a.cli.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sessionID, Node: a.cfg.Name,
		OwnerToken: o.Token, Messages: []*castv1.Message{msg}}); err != nil {
		a.lg.Warn("undelivered notice not stored", zap.String("session", sessionID), zap.Error(err))
	}
}

// noteWorkspace stores a workspace notice in the session for its owner;
// key makes a retry store it once. A notice that cannot be stored is
// logged.
func (a *Daemon) noteWorkspace(ctx context.Context, sessionID, key, text string) {
	o, ok := a.st.get(sessionID)
	if !ok {
		return
	}
	sum := sha256.Sum256([]byte(key + "\x00" + text))
	msg := &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeWorkspace,
		Text: clipReason(text), Agent: o.Agent, ClientId: "workspace." + hex.EncodeToString(sum[:12])}
	if _, err := a.cli.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sessionID, Node: a.cfg.Name,
		OwnerToken: o.Token, Messages: []*castv1.Message{msg}}); err != nil {
		a.lg.Warn("workspace notice not stored", zap.String("session", sessionID), zap.Error(err))
	}
}

// withoutUndelivered drops the user messages an undelivered notice names:
// a rebuilt native session must not carry a prompt its agent refused.
func withoutUndelivered(msgs []transcript.Message) []transcript.Message {
	type span struct{ from, to int64 }
	var spans []span
	for _, m := range msgs {
		var sp span
		if m.Kind == transcript.KindNotice && m.NoticeType == transcript.NoticeUndelivered {
			if _, err := fmt.Sscanf(strings.TrimPrefix(m.ClientID, undeliveredPrefix), "%d-%d", &sp.from, &sp.to); err == nil {
				spans = append(spans, sp)
			}
		}
	}
	if len(spans) == 0 {
		return msgs
	}
	return slices.DeleteFunc(msgs, func(m transcript.Message) bool {
		return m.Kind == transcript.KindUser && slices.ContainsFunc(spans, func(sp span) bool { return m.Seq >= sp.from && m.Seq <= sp.to })
	})
}

// pendingPrompt joins the user messages after DeliveredSeq, reading every
// page up to ReceivedSeq: a long turn leaves hundreds of agent rows before
// a message sent while it ran. It fails rather than return a prompt that
// stops short of ReceivedSeq, which the caller marks delivered.
func (a *Daemon) pendingPrompt(ctx context.Context, sessionID string, o owned) (string, int64, error) {
	var parts []string
	var first int64
	read := o.DeliveredSeq
	err := a.cli.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: sessionID, StartSeq: o.DeliveredSeq + 1, EndSeq: o.ReceivedSeq},
		func(m *castv1.Message) error {
			read = m.Seq
			if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && !ids.History(m.ClientId) { // the agent's own rows are no prompt
				if first == 0 {
					first = m.Seq
				}
				parts = append(parts, m.Text)
			}
			return nil
		})
	if err != nil {
		return "", 0, err
	}
	if read < o.ReceivedSeq {
		return "", 0, fmt.Errorf("session %s: read seqs up to %d of %d", sessionID, read, o.ReceivedSeq)
	}
	return strings.Join(parts, "\n\n"), first, nil
}

// rebuildHistory is what a rebuilt native transcript holds: the history
// before the prompt, plus what was stored after the prompt's first message
// except the prompt's user messages (and newer ones), which the turn sends
// itself, and a migration notice the prompt carries. An answer that
// finished while those messages were held (a migration's drain) comes
// after them in seq order and still belongs in it.
func (a *Daemon) rebuildHistory(ctx context.Context, sessionID string, o owned, firstSeq int64, before []transcript.Message) ([]transcript.Message, error) {
	told := func(seq int64) bool { return o.Notice != "" && seq == o.NoticeSeq } // the prompt carries it
	after, err := a.readMessages(ctx, sessionID, firstSeq, 0, func(m *castv1.Message) bool {
		return m.Kind != castv1.MessageKind_MESSAGE_KIND_USER && !told(m.Seq)
	})
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(slices.Clone(before), func(m transcript.Message) bool { return told(m.Seq) })
	return append(out, after...), nil
}

// history reads the neutral transcript up to seq.
func (a *Daemon) history(ctx context.Context, sessionID string, upto int64) ([]transcript.Message, error) {
	if upto < 1 {
		return nil, nil
	}
	msgs, err := a.readMessages(ctx, sessionID, 1, upto, nil)
	return withoutUndelivered(msgs), err
}

// readMessages pages through seqs start..end (end 0: the newest), keeping
// the messages keep accepts (all when keep is nil).
func (a *Daemon) readMessages(ctx context.Context, sessionID string, start, end int64, keep func(*castv1.Message) bool) ([]transcript.Message, error) {
	var out []transcript.Message
	err := a.cli.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: sessionID, StartSeq: start, EndSeq: end}, func(m *castv1.Message) error {
		if keep == nil || keep(m) {
			out = append(out, wire.FromProto(m))
		}
		return nil
	})
	return out, err
}

// reportStart records RUNNING before the agent starts. It is the turn's
// gate: the store refuses it while a migration fences the session (the
// messages stay held for the destination) and a stale owner gets NOT_OWNER;
// if the control plane cannot be reached no turn starts either, since a
// node that cannot record a start may be the one cut off.
func (a *Daemon) reportStart(ctx context.Context, sessionID string, o owned, fleetAccount string) error {
	if _, cut := a.cutOff(); cut {
		a.lg.Info("turn held: cut off from the control plane", zap.String("session", sessionID))
		return errHeld
	}
	// The turn is set to run (its worker took it, from o) and the store
	// does not know yet: a fault test holds the node here.
	a.failpoint("node.turn-start")
	cur, _ := a.st.get(sessionID)
	_, err := a.cli.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sessionID, Node: a.cfg.Name,
		OwnerToken: o.Token, State: castv1.SessionState_SESSION_STATE_RUNNING, DeliveredSeq: cur.DeliveredSeq, FleetAccount: fleetAccount,
		Agent: o.Agent})
	switch {
	case err == nil:
		return nil
	case client.ReasonOf(err) == "NOT_OWNER":
		return err
	case client.ReasonOf(err) == errs.ReasonAgentSwitched:
		// The store took a switch to another agent before this start
		// (a parked turn woken by a fleet credential as the switch
		// came): the turn waits for the switch's assignment, which
		// wakes the session to run its messages on the new agent.
		a.lg.Info("turn held: the session was switched to another agent", zap.String("session", sessionID))
	case client.ReasonOf(err) == errs.ReasonSessionArchived:
		// Archived (`cast rm`) while the turn was parked or failed,
		// holding its prompt; a fleet credential woke it. Nothing runs
		// in an archived session: the turn ends failed, held for good
		// (no message can reach the session to run it).
		return startRefused{err: err, final: true}
	case client.ReasonOf(err) == "SESSION_FENCED":
		a.lg.Info("turn held: the session is moving", zap.String("session", sessionID))
	case refusedForGood(err):
		// Refused for good (a delivery cursor the control plane's store
		// does not reach, after a restore): held and tried at every wake,
		// it never ran and the session showed nothing. The turn ends
		// failed instead (startRefused), its messages kept for the next.
		return startRefused{err: err}
	default:
		a.lg.Warn("turn held: could not record its start", zap.String("session", sessionID), zap.Error(err))
	}
	return errHeld
}

// startRefused is reportStart's error when the control plane refused the
// turn's start for good (refusedForGood): walk holds the turn, as failed.
type startRefused struct {
	err   error
	final bool // no next message can come (an archived session)
}

func (e startRefused) Error() string {
	msg := "the control plane refused to start the turn: " + status.Convert(e.err).Message()
	if e.final {
		return msg
	}
	return msg + "; the messages are kept and run with the next one"
}

func (e startRefused) Unwrap() error { return e.err }

// clipReason makes text the node reports (a turn's failure reason, often
// a CLI's stderr, clipped by bytes in the runner) one the control plane
// takes: a report it refuses, or that cannot even be marshalled, is sent
// again forever and holds the session's next turn.
func clipReason(s string) string { return validate.Clip(s, 1000) }

// drop forgets a session this node no longer owns. It logs the same
// "session released" as release does: whether the node learns of the move
// from the stream or from a refused fenced write (a self-fenced turn
// reporting after the lease lapsed), it has let go of the session.
func (a *Daemon) drop(sessionID string) {
	a.lg.Warn("session released: another node owns it", zap.String("session", sessionID))
	a.forget(sessionID)
}

// forget removes a session's bookkeeping.
func (a *Daemon) forget(sessionID string) {
	_ = a.st.remove(sessionID)
}

// clientID derives a stable client id for a synced native entry, so
// re-syncing the same entry (after a restart) stores it once.
func clientID(sessionID, agent, nativeSession, entry string, n int) string {
	h := sha256.Sum256([]byte(strings.Join([]string{sessionID, agent, nativeSession, entry, fmt.Sprint(n)}, "\x00")))
	return ids.SyncedPrefix + hex.EncodeToString(h[:12])
}

// sessionCwd is the cwd a report carries: the node's own only for a
// session in a worktree it made (the control plane still has the checkout
// it came from); "" leaves the session's cwd as it is.
func sessionCwd(o owned) string {
	if o.WorktreeBranch == "" {
		return ""
	}
	return o.Cwd
}
