package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// An interrupt that reaches the node while the session's turn waits to
// start (its worker still sends the last turn's end report, which the
// control plane does not take yet) stops that turn: the control plane
// sends it for a user message past the delivery cursor as for a running
// turn. The node refused it ("no running turn") and the turn then ran in
// full, the model answering a message the user had stopped.
func TestInterruptOfATurnAboutToStartStopsIt(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	waitBehindReport(ctx, t, a, p, nil)
	if err := a.interrupt("s1", false, ""); err != nil {
		t.Fatalf("interrupt of the turn about to start refused: %v", err)
	}
	p.up()
	// The pending report lands, then the stopped turn's end.
	stoppedUnstarted(ctx, t, a, p, fm, 2)
}

// An interrupt that comes while the turn reports its start (the control
// plane slow to record it) stops the turn too. The start report, cut off
// by the interrupt, held the turn (errHeld) with its prompt undelivered:
// the session's next wake (a reconnect, a message) ran the turn the user
// had stopped in full, and until then the session showed whatever the
// control plane recorded of that start (running, with no turn behind it).
func TestInterruptDuringTheStartReportStopsTheTurn(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	queueMessage(t, a, p, nil)
	p.mu.Lock()
	p.startHeld, p.startIn = true, make(chan struct{})
	p.mu.Unlock()
	a.wake("s1")
	select {
	case <-p.startIn:
	case <-ctx.Done():
		t.Fatal("the turn never reported its start")
	}
	if err := a.interrupt("s1", false, ""); err != nil {
		t.Fatalf("interrupt of the starting turn refused: %v", err)
	}
	a.wake("s1") // as a reconnect does
	stoppedUnstarted(ctx, t, a, p, fm, 1)
}

// queueMessage gives session s1 one user message its node received and
// has not run (with, when set, changes the rest of its node state).
func queueMessage(t *testing.T, a *Daemon, p *plane, with func(*owned)) {
	t.Helper()
	_ = p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "do not answer this", ClientId: "u1"})
	if err := a.st.assign("s1", func(o *owned) {
		o.Token, o.Agent, o.Cwd = 1, "claude", t.TempDir()
		o.ReceivedSeq = 1
		if with != nil {
			with(o)
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// waitBehindReport queues a message for s1 (queueMessage, with) behind
// the earlier turn's end report, which the control plane does not take
// yet, and returns once the woken worker sent that report: the turn waits
// behind it, not started, until p.up.
func waitBehindReport(ctx context.Context, t *testing.T, a *Daemon, p *plane, with func(*owned)) {
	t.Helper()
	queueMessage(t, a, p, func(o *owned) {
		o.Report = &turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, Pending: true}
		if with != nil {
			with(o)
		}
	})
	p.mu.Lock()
	p.reportsDown = true
	p.mu.Unlock()
	a.wake("s1")
	select {
	case <-p.reportRefused:
	case <-ctx.Done():
		t.Fatal("the worker never sent its pending report")
	}
}

// stoppedUnstarted waits for idles idle reports of s1 and checks that its
// turn never started: no start report, no model request, and the message
// done (the next turn carries it as history).
func stoppedUnstarted(ctx context.Context, t *testing.T, a *Daemon, p *plane, fm *fakemodel.Server, idles int) {
	t.Helper()
	for idles > 0 {
		select {
		case st := <-p.reports:
			if st == castv1.SessionState_SESSION_STATE_RUNNING {
				t.Fatal("the interrupted turn started")
			}
			if st == castv1.SessionState_SESSION_STATE_IDLE {
				idles--
			}
		case <-ctx.Done():
			o, _ := a.st.get("s1")
			t.Fatalf("the interrupted turn did not end: delivered seq %d, failed seq %d", o.DeliveredSeq, o.FailedSeq)
		}
	}
	if o, _ := a.st.get("s1"); o.DeliveredSeq != 1 {
		t.Fatalf("delivered seq %d after the interrupt, want 1", o.DeliveredSeq)
	}
	if n := len(fm.Turns()); n != 0 {
		t.Fatalf("the model got %d requests for a turn interrupted before it started", n)
	}
	if r := p.lastLanded(); !r.Interrupted {
		t.Fatalf("the stopped turn's end report is not marked interrupted (exit code %d)", r.ExitCode)
	}
}

// interruptedRunning has in reach s1's node while its claude turn waits
// for the model's answer, and checks that it stopped the turn: its end
// report is marked interrupted.
func interruptedRunning(t *testing.T, in *castv1.Interrupt) {
	t.Helper()
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	setUpSession(t, a, p, nil)
	answer := heldAtTheModel(ctx, t, a, fm)
	defer close(answer)
	if err := a.handle(ctx, &castv1.Command{Kind: &castv1.Command_Interrupt{Interrupt: in}}); err != nil {
		t.Fatalf("interrupt (agent %q) of the running turn refused: %v", in.Agent, err)
	}
	idleAt(ctx, t, a, p, 3)
	if r := p.lastLanded(); !r.Interrupted {
		t.Fatalf("the interrupted turn's end report is not marked interrupted (exit code %d)", r.ExitCode)
	}
}

// An interrupt that comes while the session's turn waits to run again (its
// set-up failed because the control plane did not answer, and the worker
// backs off before it retries) stops that turn at once, whether it comes
// as the set-up fails or during the back-off. One during the back-off was
// acknowledged but seen only when the back-off ended (up to
// --reconnect-max, the session showing running meanwhile); one that came
// as the set-up failed was lost, and the turn then ran in full.
func TestInterruptOfATurnBackingOffStopsIt(t *testing.T) {
	for _, at := range []string{"node.turn-not-set-up", "node.turn-backoff"} {
		t.Run(at, func(t *testing.T) {
			fm := fakemodel.Start(t)
			a, p, ctx := workerDaemon(t, fm)
			// A back-off longer than the test: only the interrupt ends it.
			a.cfg.ReconnectMin, a.cfg.ReconnectMax = 10*time.Minute, 10*time.Minute
			var once sync.Once
			a.cfg.Failpoint = func(name string) {
				if name == at {
					once.Do(func() {
						if err := a.interrupt("s1", false, ""); err != nil {
							t.Errorf("interrupt of the turn refused: %v", err)
						}
					})
				}
			}
			setUpSession(t, a, p, nil) // no native session: the set-up reads the history
			p.mu.Lock()
			p.readsDownOnStart = true // and the read fails UNAVAILABLE
			p.mu.Unlock()
			a.wake("s1")
			idleAt(ctx, t, a, p, 3)
			if n := len(fm.Turns()); n != 0 {
				t.Fatalf("the model got %d requests for an interrupted turn", n)
			}
		})
	}
}

// A turn the user interrupts ends as an interrupt, not a failure: its end
// report says so, and the prompt is delivered (the next turn carries it
// once); one stopped before the agent took its prompt says so too
// (stoppedUnstarted). The report carried only the CLI's death by the
// node's signal (exit 143, -1), which `cast get` showed as the session's
// last error and `cast exec --resume` took for the agent's exit. A turn
// that ran to its end is not interrupted.
func TestUserInterruptIsReportedAsInterrupted(t *testing.T) {
	t.Run("after the agent took the prompt", func(t *testing.T) {
		interruptedRunning(t, &castv1.Interrupt{SessionId: "s1"})
	})
	t.Run("abandoned by a move", func(t *testing.T) {
		// A move (or the node cut off) stops the turn with no one asking:
		// its prompt runs again, on the destination, so its end is neither
		// an interrupt nor the CLI's death by the signal shown as the
		// turn's exit (it was: `cast exec --resume` exited 143 mid-move).
		fm := fakemodel.Start(t)
		a, p, ctx := workerDaemon(t, fm)
		setUpSession(t, a, p, nil)
		answer := heldAtTheModel(ctx, t, a, fm)
		defer close(answer)
		if err := a.interrupt("s1", true, ""); err != nil {
			t.Fatalf("abandon of the running turn refused: %v", err)
		}
		// The turn's end: its report is the first idle one past the turns
		// that ran to their end (exit 0, no flag).
		ended := func() *castv1.ReportTurnRequest {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, r := range p.landed {
				if r.State == castv1.SessionState_SESSION_STATE_IDLE && (r.Abandoned || r.Interrupted || r.ExitCode != 0) {
					return r
				}
			}
			return nil
		}
		poll := time.NewTicker(10 * time.Millisecond)
		defer poll.Stop()
		end := ended()
		for ; end == nil; end = ended() {
			select {
			case <-poll.C:
			case <-ctx.Done():
				t.Fatal("the abandoned turn's end was never reported")
			}
		}
		if !end.Abandoned || end.Interrupted {
			t.Fatalf("the abandoned turn's end report: abandoned %v, interrupted %v, exit code %d; want abandoned only", end.Abandoned, end.Interrupted, end.ExitCode)
		}
	})
	t.Run("not interrupted", func(t *testing.T) {
		fm := fakemodel.Start(t)
		a, p, ctx := workerDaemon(t, fm)
		setUpSession(t, a, p, nil)
		a.wake("s1")
		idleAt(ctx, t, a, p, 3)
		if r := p.lastLanded(); r.Interrupted {
			t.Fatal("a turn that ran to its end is reported interrupted")
		}
	})
}

// switchInterrupt is the interrupt a switch away from agent sends s1's
// owner (Interrupt.agent names the agent it stops).
func switchInterrupt(agent string) *castv1.Command {
	return &castv1.Command{Kind: &castv1.Command_Interrupt{Interrupt: &castv1.Interrupt{SessionId: "s1", Agent: agent}}}
}

// A switch's interrupt, sent as its read saw the old agent's turn running,
// can reach the node after that turn ended (its end report not recorded
// yet) with the next message waiting, and before the switch's assignment:
// it was taken for the waiting turn (stopNext), which then ran the new
// agent and ended before it started ("interrupted before the agent took
// its prompt"), the message unanswered until the user's next one. The
// interrupt names the agent it stops (the old one) and stops only that
// agent's running turn: a waiting turn is left to the store, which refuses
// the old agent's start, so the new agent's turn runs the message. So does
// a new agent's running turn it reaches late.
func TestSwitchInterruptStopsOnlyTheOldAgentsTurn(t *testing.T) {
	t.Run("queued turn of the new agent", func(t *testing.T) {
		fm := fakemodel.Start(t)
		a, p, ctx := workerDaemon(t, fm)
		cwd := t.TempDir()
		// codex's turn ended; its end report has not landed; a message waits.
		waitBehindReport(ctx, t, a, p, func(o *owned) { o.Agent, o.Cwd = "codex", cwd })
		// No turn of codex runs: it stops nothing (the store refuses
		// codex's start now, and the node holds it for the assignment).
		if err := a.handle(ctx, switchInterrupt("codex")); err == nil {
			t.Fatal("the switch's interrupt stopped the queued turn")
		}
		// The switch's assignment: the session runs claude now (the store
		// still shows codex's turn running).
		assign := &castv1.Command{Kind: &castv1.Command_AssignSession{AssignSession: &castv1.AssignSession{
			Session: &castv1.Session{Id: "s1", Agent: "claude", Cwd: cwd, LastSeq: 1, State: castv1.SessionState_SESSION_STATE_RUNNING}, OwnerToken: 1}}}
		if err := a.handle(ctx, assign); err != nil {
			t.Fatal(err)
		}
		p.up()
		idleAt(ctx, t, a, p, 1)
		r := p.lastLanded()
		if n := len(fm.Turns()); n != 1 || r.Interrupted {
			t.Fatalf("the new agent's turn: %d model requests, its end report interrupted %v; want it run (1, false)", n, r.Interrupted)
		}
	})
	t.Run("running turn of the new agent", func(t *testing.T) {
		fm := fakemodel.Start(t)
		a, p, ctx := workerDaemon(t, fm)
		setUpSession(t, a, p, nil)
		answer := heldAtTheModel(ctx, t, a, fm)
		if err := a.handle(ctx, switchInterrupt("codex")); err == nil {
			t.Fatal("a switch's interrupt for codex stopped claude's turn")
		}
		close(answer)
		idleAt(ctx, t, a, p, 3)
		if r := p.lastLanded(); r.Interrupted {
			t.Fatal("claude's turn ended interrupted by a switch away from codex")
		}
	})
	t.Run("running turn of the old agent", func(t *testing.T) {
		interruptedRunning(t, switchInterrupt("claude").GetInterrupt())
	})
}

// A node cut off abandons the turns that run (abandonAll); a session's
// worker waiting with a message queued has none, and its turn is not
// stopped: it runs once the node is back.
func TestAbandonAllLeavesAQueuedTurn(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, _ := workerDaemon(t, fm)
	queueMessage(t, a, p, nil)
	w := a.worker("s1") // idle: not woken
	if n := a.workers.abandonAll(); n != 0 {
		t.Fatalf("abandoned %d turns of an idle worker", n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopNext {
		t.Fatal("abandoning stopped the queued turn")
	}
}
