package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/runner"
)

// workers runs at most one turn per session at a time, each session in its
// own goroutine, woken when user messages arrive.
type workers struct {
	mu   sync.Mutex
	byID map[string]*worker
	wg   sync.WaitGroup
}

type worker struct {
	wakeCh chan struct{}
	mu     sync.Mutex
	cancel context.CancelFunc // of the running turn, nil when idle
	// abandon: the running turn was stopped because the session is moving
	// (or the node is cut off): its prompt stays undelivered.
	abandon bool
	// released: the session moved away; the worker forgets it and ends.
	released bool
	// held: the session's folder is changing (workspaces.go); no turn
	// starts until it is let go, which wakes the worker.
	held bool
	// stopNext: an interrupt came while the session's turn waited to
	// start (its worker sending the last turn's report, or held): that
	// turn ends as interrupted before the agent took its prompt.
	stopNext bool
	// agent is the running turn's agent, which a switch's interrupt
	// must name to stop it.
	agent string
	// stopped: the running turn was interrupted (not abandoned).
	stopped bool
	// rewind: an assignment from a store restored from an older snapshot
	// came while the turn ran; the turn's end takes its cursor.
	rewind *pendingRewind
}

// errHeld means the turn did not start and should not be retried until the
// next wake: the session is fenced by a migration, or the control plane
// could not record the start.
var errHeld = errors.New("turn held")

// wake starts (or nudges) the session's worker.
func (a *Daemon) wake(sessionID string) {
	w := a.worker(sessionID)
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// worker returns the session's worker, started if it had none.
func (a *Daemon) worker(sessionID string) *worker {
	a.workers.mu.Lock()
	defer a.workers.mu.Unlock()
	if a.workers.byID == nil {
		a.workers.byID = map[string]*worker{}
	}
	w := a.workers.byID[sessionID]
	if w == nil {
		w = &worker{wakeCh: make(chan struct{}, 1)}
		a.workers.byID[sessionID] = w
		a.background(func() { a.work(a.runCtx, sessionID, w) })
	}
	return w
}

// hold keeps the session's turns from starting while its folder changes;
// false when a turn runs (or another change holds it) now. The returned
// func lets turns run again.
func (a *Daemon) hold(sessionID string) (func(), bool) {
	w := a.worker(sessionID)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil || w.held {
		return nil, false
	}
	w.held = true
	return func() {
		w.mu.Lock()
		w.held = false
		w.mu.Unlock()
		a.wake(sessionID)
	}, true
}

// running reports whether a turn of the session runs now.
func (ws *workers) running(sessionID string) bool {
	return ws.locked(sessionID, func(w *worker) bool { return w.cancel != nil })
}

func (ws *workers) get(sessionID string) *worker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.byID[sessionID]
}

// locked runs fn on the session's worker with its lock held; false when
// the session has no worker (nothing runs, nothing to mark).
func (ws *workers) locked(sessionID string, fn func(*worker) bool) bool {
	w := ws.get(sessionID)
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return fn(w)
}

// forget removes w (ended) so a later wake starts a fresh worker.
func (ws *workers) forget(sessionID string, w *worker) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byID[sessionID] == w {
		delete(ws.byID, sessionID)
	}
}

// interrupt stops the session's running turn; abandon keeps its prompt
// undelivered. A plain interrupt with no turn running stops the turn
// queued (queued reports whether one waits to start, w.mu held): the
// control plane sends one for a message past the delivery cursor as for a
// running turn. A switch's names the agent it switched from (agent; ""
// any) and stops only that agent's running turn: another agent's turn is
// the new agent's, which it reached late (the old agent's turn had
// ended), so it is left to run. False when it stopped nothing.
func (ws *workers) interrupt(sessionID string, abandon bool, agent string, queued func() bool) bool {
	return ws.locked(sessionID, func(w *worker) bool {
		if w.cancel != nil {
			// "" (`cast interrupt`, a move) stops any agent's turn.
			return (agent == "" || agent == w.agent) && w.stopTurn(abandon)
		}
		if abandon || agent != "" {
			// A move's: nothing runs to abandon. A switch's: a turn
			// waiting to start is left alone whichever agent it would
			// run: the store refuses the old agent's start
			// (AGENT_SWITCHED) and the node holds it for the switch's
			// assignment, so the new agent runs its message.
			return false
		}
		if queued() {
			w.stopNext = true
			// A worker backing off after a set-up the control plane did not
			// answer sees it now, not after the back-off.
			select {
			case w.wakeCh <- struct{}{}:
			default:
			}
			return true
		}
		return false
	})
}

// stopTurn cancels w's running turn, abandon keeping its prompt
// undelivered; false when no turn runs. w.mu is held.
func (w *worker) stopTurn(abandon bool) bool {
	if w.cancel == nil {
		return false
	}
	w.abandon = w.abandon || abandon
	w.stopped = w.stopped || !abandon
	w.cancel()
	return true
}

// release marks the session's worker released and abandons its turn. True
// when a turn was running: the worker then forgets the session itself,
// after the turn's bookkeeping.
func (ws *workers) release(sessionID string) bool {
	return ws.locked(sessionID, func(w *worker) bool {
		w.released = true
		select {
		case w.wakeCh <- struct{}{}: // an idle worker ends on its next look
		default:
		}
		return w.stopTurn(true)
	})
}

// abandonAll stops every running turn, keeping their prompts undelivered,
// and returns how many it stopped.
func (ws *workers) abandonAll() int {
	ws.mu.Lock()
	list := make([]string, 0, len(ws.byID))
	for id := range ws.byID {
		list = append(list, id)
	}
	ws.mu.Unlock()
	n := 0
	for _, id := range list {
		if ws.interrupt(id, true, "", nil) {
			n++
		}
	}
	return n
}

// abandoned reports (and clears) whether the session's last turn was
// abandoned.
func (ws *workers) abandoned(sessionID string) bool {
	return ws.locked(sessionID, func(w *worker) bool {
		ab := w.abandon
		w.abandon = false
		return ab
	})
}

// work runs turns for the session until ctx ends or the session is gone.
func (a *Daemon) work(ctx context.Context, sessionID string, w *worker) {
	defer a.workers.forget(sessionID, w)
	pauses := retry.Reconnect(a.cfg.ReconnectMin, a.cfg.ReconnectMax).Pauses() // after a turn that could not even start
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wakeCh:
		}
	turns:
		for ctx.Err() == nil {
			switch a.turn(ctx, sessionID, w, pauses) {
			case turnEnd:
				return
			case turnWait:
				break turns
			}
		}
	}
}

// turnStep is what a session's worker does after a step of its loop.
type turnStep int

const (
	turnNext turnStep = iota // look for the next turn
	turnWait                 // wait for a wake
	turnEnd                  // the worker ends
	turnRun                  // (startTurn) run the turn
)

// turn runs the session's next turn, if it has one.
func (a *Daemon) turn(ctx context.Context, sessionID string, w *worker, pauses *retry.Pauses) turnStep {
	// The last turn's end is recorded before anything else.
	if !a.flushReport(ctx, sessionID) {
		a.drop(sessionID)
		return turnEnd
	}
	tctx, cancel := context.WithCancel(ctx)
	o, next := a.startTurn(ctx, sessionID, w, cancel)
	if next != turnRun {
		return next
	}
	err := a.runTurn(tctx, sessionID, o)
	w.mu.Lock()
	w.cancel = nil
	released, stopped := w.released, w.stopped
	w.mu.Unlock()
	cancel()
	if released {
		a.forget(sessionID) // release logged it
		return turnEnd
	}
	if stopped && (errors.Is(err, errHeld) || err != nil && client.ReasonOf(err) != "NOT_OWNER" && a.stuck(sessionID, o)) {
		// Interrupted before its CLI started (its start report cut
		// short, or as its set-up failed to run again): the turn
		// ends as one stopped before it started, not held or
		// retried to run in full.
		a.stopUnstarted(ctx, sessionID, o)
		a.afterTurn(ctx, sessionID, w)
		return turnNext
	}
	a.afterTurn(ctx, sessionID, w) // after the turn's last write of its cursors
	return a.turnEnded(ctx, sessionID, w, o, err, pauses)
}

// startTurn reads the state the session's next turn starts from (o) and
// marks the turn running under cancel (turnRun), unless the session was
// released, has nothing to run or is held, or an interrupt came first,
// which stops the turn before it starts.
func (a *Daemon) startTurn(ctx context.Context, sessionID string, w *worker, cancel context.CancelFunc) (owned, turnStep) {
	w.mu.Lock()
	// Read under w.mu: a workspace move (hold) cannot slip between
	// this read and the turn's start.
	o, ok := a.st.get(sessionID)
	if w.released {
		w.mu.Unlock()
		cancel()
		return o, turnEnd // release dropped the state
	}
	if !ok || w.held || o.ReceivedSeq <= o.DeliveredSeq || o.ReceivedSeq <= o.FailedSeq {
		w.mu.Unlock()
		cancel()
		return o, turnWait
	}
	if w.stopNext {
		w.stopNext = false
		w.mu.Unlock()
		cancel()
		a.stopUnstarted(ctx, sessionID, o)
		return o, turnNext
	}
	w.cancel, w.abandon, w.stopped, w.agent = cancel, false, false, o.Agent
	w.mu.Unlock()
	return o, turnRun
}

// turnEnded is what the worker does after a turn that started from o
// ended with err: held waits for a wake, a failure that left the session
// as it was (stuck) waits for the next pause first.
func (a *Daemon) turnEnded(ctx context.Context, sessionID string, w *worker, o owned, err error, pauses *retry.Pauses) turnStep {
	if errors.Is(err, errHeld) {
		return turnWait // a later wake (fence lifted, reconnect) tries again
	}
	if err == nil {
		pauses.Reset()
		return turnNext
	}
	a.lg.Warn("turn failed", zap.String("session", sessionID), zap.Error(err))
	if client.ReasonOf(err) == "NOT_OWNER" {
		a.drop(sessionID)
		return turnEnd
	}
	if a.stuck(sessionID, o) {
		// Nothing moved (the control plane is unreachable, say): the
		// same call would fail again at once, so wait, unless woken.
		a.failpoint("node.turn-backoff")
		select {
		case <-ctx.Done():
		case <-w.wakeCh:
		case <-time.After(pauses.Next()):
		}
	}
	return turnNext
}

// stopUnstarted ends a turn interrupted before its CLI started, as one
// interrupted before the agent took its prompt (interruptedUnheld).
func (a *Daemon) stopUnstarted(ctx context.Context, sessionID string, o owned) {
	a.lg.Info("turn interrupted before it started", zap.String("session", sessionID))
	a.interruptedUnheld(ctx, sessionID, o, runner.Result{})
}

// stuck reports whether a failed runTurn left the session's delivery state
// as it found it (before is the state the turn started from): a failed turn
// records FailedSeq or moves DeliveredSeq; an error before the turn started,
// or a set-up the control plane did not answer (retrySetUp), changes
// neither.
func (a *Daemon) stuck(sessionID string, before owned) bool {
	now, ok := a.st.get(sessionID)
	return ok && now.DeliveredSeq == before.DeliveredSeq && now.FailedSeq == before.FailedSeq
}
