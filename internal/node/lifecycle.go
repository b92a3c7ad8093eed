package node

import (
	"cmp"
	"context"
	"errors"
	"sync/atomic"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
)

// A turn on this node is one lifecycle, the way Nomad's task runner walks a
// task through its hooks. Its phases and their order live here; the side
// jobs are named hooks (prepareHooks and turnHooks in hooks.go) and
// outcomes (outcomes below):
//
//	queued       the worker found undelivered messages: the prompt is read,
//	             the custody hook binds the turn to a fleet account, and
//	             the start is reported (the store's gate: a fenced or foreign
//	             session holds the turn)
//	preparing    the prepare hooks: credentials, checkout, worktree, mcp,
//	             native (reuse, delta, native fork or rebuild)
//	running      the limits hook asks a fleet turn for usage windows; the
//	             CLI runs; its native rows are synced as they appear
//	interrupting ctx ended (an interrupt, a switch, a move, a cut-off): the
//	             runner stops the process group
//	reporting    the rows are stored, the outcome is recorded in state.json
//	             (limits claims a usage limit: parked) and the end state is
//	             reported (kept pending until it lands)
//	done|failed  the turn is over
type turnPhase int32

const (
	phaseQueued turnPhase = iota
	phasePreparing
	phaseRunning
	phaseInterrupting
	phaseReporting
	phaseDone
	phaseFailed
)

var phaseNames = [...]string{"queued", "preparing", "running", "interrupting", "reporting", "done", "failed"}

func (p turnPhase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return "unknown"
	}
	return phaseNames[p]
}

// turn is one turn of a session on this node.
type turn struct {
	a     *Daemon
	id    string
	o     owned // the session's record as the turn started
	lg    *zap.Logger
	phase atomic.Int32

	prompt   string
	firstSeq int64
	fc       fleetCred // the fleet account its credential store holds (none for an own account)
	rt       runner.Turn
	rebuilt  []int64 // turnSetup.rebuilt
	sync     *syncer
	res      runner.Result
	runErr   error
	syncErr  error
}

// enter moves the turn to phase p (transitions are logged at debug).
func (t *turn) enter(p turnPhase) {
	from := turnPhase(t.phase.Swap(int32(p)))
	t.lg.Debug("turn phase", zap.Stringer("from", from), zap.Stringer("to", p))
}

// runTurn hands the undelivered user messages to the agent as one turn.
func (a *Daemon) runTurn(ctx context.Context, sessionID string, o owned) error {
	t := &turn{a: a, id: sessionID, o: o, lg: a.lg.With(zap.String("session", sessionID), zap.String("agent", o.Agent))}
	err := t.walk(ctx)
	if err != nil && !errors.Is(err, errHeld) {
		t.enter(phaseFailed)
	} else {
		t.enter(phaseDone)
	}
	return err
}

// walk takes the turn through its phases.
func (t *turn) walk(ctx context.Context) error {
	run, err := t.queued(ctx)
	if refused := (startRefused{}); errors.As(err, &refused) {
		// Ends visibly, held like a turn not set up: the agent never saw
		// the prompt, and the next message carries it.
		t.lg.Warn("turn start refused for good; held", zap.Error(refused.err))
		return t.a.holdTurn(ctx, t.id, t.o, refused.Error(), -1)
	}
	if err != nil || !run {
		return err
	}
	t.enter(phasePreparing)
	defer t.writesNative()()
	s, err := t.a.prepareTurn(ctx, t.id, t.o, t.firstSeq, t.prompt, t.fc.Account, true)
	t.rt, t.rebuilt = s.rt, s.rebuilt
	if err != nil && ctx.Err() != nil {
		// Stopped while it was set up (an interrupt, a switch, a move, the
		// node stopping): it ends as a turn stopped before its CLI
		// started. Held as one the node could not set up, the session
		// showed failed ("context canceled") and the prompt waited for the
		// next message, after a restart too.
		t.res, t.runErr = runner.Result{ExitCode: -1}, stoppedSetUp()
		t.enter(phaseReporting)
		return t.settle(t.a.runCtx, t.outcome())
	}
	if err != nil {
		// The node could not set the turn up: the agent never saw the prompt.
		return t.notSetUp(ctx, err, retrySetUp(ctx, err), -1)
	}
	if err := t.markToken(); err != nil {
		return err
	}
	t.enter(phaseRunning)
	t.run(ctx)
	t.enter(phaseReporting)
	// Bookkeeping after the turn must not die with an interrupted turn's ctx.
	return t.report(t.a.runCtx)
}

// queued reads what the turn runs and reports its start; false when there
// is nothing to run (the cursor moved over non-user rows).
func (t *turn) queued(ctx context.Context) (bool, error) {
	a, o := t.a, t.o
	if a.st.behind() {
		// The node could not record what it holds (a full disk); a turn
		// it cannot mark delivered could run twice after a restart.
		// recordAgain wakes the session once a write succeeds.
		t.lg.Info("turn held: node state not written")
		return false, errHeld
	}
	prompt, firstSeq, err := a.pendingPrompt(ctx, t.id, o)
	if err != nil {
		return false, err
	}
	if prompt == "" { // nothing but non-user rows: just move the cursor
		return false, a.st.session(t.id, func(s *owned) { s.DeliveredSeq = o.ReceivedSeq })
	}
	if o.Notice != "" {
		prompt = "[cast] " + o.Notice + "\n\n" + prompt
	}
	t.prompt, t.firstSeq = prompt, firstSeq
	t.runHooks(phaseQueued, func(h turnHook) func(*turn) { return h.queued })
	return true, a.reportStart(ctx, t.id, o, t.fc.Account)
}

// markToken writes the turn's token before its CLI starts: a kill -9
// between the start and OnStart's write must not leave a CLI no restart
// finds. A turn whose token cannot be written does not start (errHeld; a
// full disk: small writes may still fit where this one did not), and
// recordAgain wakes it once a write succeeds.
func (t *turn) markToken() error {
	token := newTurnToken()
	if err := t.a.st.session(t.id, func(s *owned) { s.TurnToken = token }); err != nil {
		t.lg.Info("turn held: node state not written", zap.Error(err))
		_ = t.a.st.session(t.id, func(s *owned) { s.TurnToken = "" }) // in memory: no CLI carries it
		t.a.showUnrecorded(t.id, err)
		return errHeld
	}
	t.rt.Env = append(t.rt.Env, turnTokenEnv+"="+token)
	return nil
}

// run runs the CLI, syncing its rows; a native fork that did not run runs
// again on a rebuilt history.
func (t *turn) run(ctx context.Context) {
	a := t.a
	t.runHooks(phaseRunning, func(h turnHook) func(*turn) { return h.running })
	t.sync = newSyncer(a, t.id, t.o, t.rt, t.rebuilt)
	t.rt.OnStart = func(pgid int) {
		_ = a.st.session(t.id, func(s *owned) { s.RunningPGID = pgid })
	}
	stop := context.AfterFunc(ctx, func() { t.enter(phaseInterrupting) })
	defer stop()
	ended := a.turnStarted(t.o.Agent)
	t.res, t.runErr = a.runner.Run(ctx, t.rt, t.sync.emit)
	if t.rt.ForkOf != "" && forkDidNotRun(t.res, t.runErr) {
		t.res, t.runErr = a.rerunRebuilt(ctx, t.id, t.o, t.firstSeq, t.prompt, t.fc.Account, t.rt, t.sync, t.runErr)
	}
	if resumeMissed(t.rt, t.res, t.runErr) {
		t.res, t.runErr = a.rerunStale(ctx, t.id, t.o, t.firstSeq, t.prompt, t.fc.Account, t.rt, t.sync, t.runErr)
	}
	ended(t.runErr)
}

// writesNative marks the turn's agent as running a CLI of cast's until the
// returned func, which first records the native session the turn used as
// cast's. It starts before preparation: a rebuild's file is written
// before the CLI starts, and adoption, which waits on a file new to it
// while the agent counts as running, took such a file for a session the
// user ran (TestAdoptNativeSessions in CI).
func (t *turn) writesNative() (done func()) {
	release := t.a.clis.running(t.o.Agent)
	return func() {
		t.a.clis.used(t.o.Agent, t.nativePath(), t.nativeID(), t.id)
		release()
	}
}

// nativePath and nativeID are the native session the turn used: the
// CLI's, or the one prepare set up when the CLI did not run.
func (t *turn) nativePath() string { return cmp.Or(t.res.NativePath, t.rt.NativePath) }
func (t *turn) nativeID() string   { return cmp.Or(t.res.NativeID, t.rt.NativeID) }

// report stores the turn's rows, then records its outcome.
func (t *turn) report(ctx context.Context) error {
	t.syncErr = t.sync.close(ctx)
	out := t.outcome()
	t.lg.Debug("turn outcome", zap.Stringer("outcome", out))
	t.a.failpoint("node.turn-before-outcome") // rows stored, outcome not recorded
	err := t.settle(ctx, out)
	t.ended()
	return err
}

// ended clears the turn's markers (RunningPGID, TurnToken) once settle
// recorded its outcome, not before: a node stopped or killed until then
// finds them on restart (stopOrphans) and runs the prompt again on a
// rebuilt native session, since the CLI's own may hold the prompt or the
// whole turn already. Cleared first, a restart in between resumed that
// native session with the prompt again (Gemini got one message twice in
// one request; the delivery rule's model-based test found it). A node
// killed after settle and before this write rebuilds once for nothing. A
// turn whose rows did not all reach the neutral copy runs again (settle
// records nothing for it) on a rebuilt native session too.
func (t *turn) ended() {
	_ = t.a.st.session(t.id, func(s *owned) {
		s.RunningPGID, s.TurnToken = 0, ""
		if ns := s.Native[t.o.Agent]; ns != nil && t.syncErr != nil {
			ns.Stale = true
		}
	})
}

// outcome is how a turn ended; settle records each one.
type outcome int

const (
	outCompleted outcome = iota
	outSyncFailed
	outSyncRefused
	outAbandoned
	outInterruptedUnheld
	outInterrupted
	outParked
	outNotLoggedIn
	outNoCLI
	outRefused
	outNotSetUp
	outKilled
)

var outcomeNames = [...]string{"completed", "sync failed", "sync refused", "abandoned", "interrupted before the agent took its prompt",
	"interrupted", "parked", "not logged in", "binary not found", "failed", "not set up", "killed"}

func (o outcome) String() string { return outcomeNames[o] }

// outcome classifies how the turn ended.
func (t *turn) outcome() outcome {
	rerr := t.runnerErr()
	switch {
	case errors.As(t.syncErr, new(rowsRefused)):
		return outSyncRefused
	case t.syncErr != nil:
		return outSyncFailed
	case t.runErr == nil:
		return outCompleted
	case errors.As(t.runErr, new(rerunNotSetUp)):
		return outNotSetUp
	case rerr == nil:
		return outRefused
	case rerr.Reason == runner.ReasonInterrupted && (t.a.workers.abandoned(t.id) || t.a.runCtx.Err() != nil):
		// Moving, cut off, or the node stopping: no one asked to stop the
		// turn, so its prompt runs again (after a restart, as after a
		// kill -9). Settled as an interrupt, a stop left the message
		// unanswered for good.
		return outAbandoned
	case rerr.Reason == runner.ReasonInterrupted && !t.res.PromptSeen:
		return outInterruptedUnheld
	case rerr.Reason == runner.ReasonInterrupted:
		return outInterrupted
	}
	if out, ok := t.hookOutcome(); ok {
		return out
	}
	switch rerr.Reason {
	case runner.ReasonNotLoggedIn:
		return outNotLoggedIn
	case runner.ReasonBinaryNotFound:
		return outNoCLI
	case runner.ReasonKilled:
		return outKilled
	}
	return outRefused
}

// settle records the outcome in the node's state and reports it (a turn
// hook settles the outcomes it owns).
func (t *turn) settle(ctx context.Context, out outcome) error {
	for _, h := range turnHooks() {
		if h.settle != nil && h.settles == out {
			return h.settle(t, ctx)
		}
	}
	a := t.a
	switch out {
	case outSyncFailed:
		return t.syncErr
	case outSyncRefused:
		// The control plane refused the turn's rows for good: the answer
		// is not in the neutral copy, so the prompt is not delivered, and
		// run again now it would be refused again (the session showed
		// running with no process while its worker ran it over and over).
		// Held like a turn not set up: the next message carries it, on a
		// native session rebuilt from the neutral copy (ended).
		return a.holdTurn(ctx, t.id, t.o, t.syncErr.Error(), t.res.ExitCode)
	case outAbandoned:
		// Moving (or cut off): the prompt stays undelivered for whoever
		// runs the session next, and the native copy may hold half a turn.
		return t.abandoned(ctx)
	case outInterruptedUnheld:
		// Over, but the native session does not hold the prompt (the CLI
		// had not taken it, or keeps it only as a queued item): nothing is
		// marked as known, so the next turn's catch-up carries the prompt
		// as history.
		a.interruptedUnheld(ctx, t.id, t.o, t.res)
		return nil
	case outNotLoggedIn:
		a.recheckAgents() // `cast nodes` says so at once, and shows ready once the user logs in
		return a.holdTurn(ctx, t.id, t.o, a.cfg.loginAdvice(t.rt, t.runnerErr().Detail), t.res.ExitCode)
	case outNoCLI:
		return a.holdTurn(ctx, t.id, t.o, a.cfg.installAdvice(t.rt, t.runnerErr().Detail), t.res.ExitCode)
	case outNotSetUp:
		// The node could not set up a rerun (rerunNotSetUp): the agent
		// never saw the prompt, which is retried or held as when the first
		// attempt could not be set up (walk). Its retry was decided under
		// the turn's ctx: this one outlives an interrupt.
		var ns rerunNotSetUp
		errors.As(t.runErr, &ns)
		return t.notSetUp(ctx, t.runErr, ns.retry, t.res.ExitCode)
	case outKilled:
		// Killed from outside (the OOM killer, a user's kill, a service
		// manager stopping the node with its CLIs): the agent did not
		// refuse the prompt, so it is held for the next message, or the
		// node's next start (as a refusal it was dropped, answered by no
		// turn), on a native session rebuilt from the neutral copy, since
		// the killed CLI may have written the prompt, or half a line
		// (markFailed).
		return a.holdAs(ctx, failKilled, t.id, t.o, t.o.Agent+": "+t.runErr.Error()+"; the message is kept and runs with the next one, or when the node starts again", t.res.ExitCode)
	case outRefused:
		// The agent did not take the prompt: it is reported undelivered and
		// the next message runs without it (failTurn).
		return a.failTurn(ctx, t.id, t.o, t.o.Agent+": "+t.runErr.Error(), t.res.ExitCode)
	}
	return t.completed(ctx) // completed, or interrupted after the agent took the prompt
}

// rerunNotSetUp is the error of a rerun on a rebuilt native session
// (rerunStale, rerunRebuilt) that the node could not set up: the history
// read, the writer or a state write failed before any CLI ran again. It
// is no refusal: a plain error would settle as outRefused and drop the
// prompt the agent never saw. retry is retrySetUp's answer.
type rerunNotSetUp struct {
	err   error
	retry bool
}

func (e rerunNotSetUp) Error() string { return e.err.Error() }
func (e rerunNotSetUp) Unwrap() error { return e.err }

// notSetUpRerun is the error of a rerun whose set-up failed with err under
// the turn's ctx: rerunNotSetUp, or the runner's interrupted when ctx
// ended (the turn was stopped, as during a first attempt's set-up).
func notSetUpRerun(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return stoppedSetUp()
	}
	return rerunNotSetUp{err: err, retry: retrySetUp(ctx, err)}
}

// stoppedSetUp is the error of a turn stopped before its CLI started: the
// runner's own for an interrupt, so the turn settles as one (outcome).
func stoppedSetUp() error { return &runner.Error{Reason: runner.ReasonInterrupted} }

// retrySetUp says whether a turn whose set-up failed with err runs again
// by itself rather than being held until the next message: the control
// plane did not answer (transient, what the syncer waits out: down,
// restarting, as after a kill -9 right after the start report) and the
// turn was not stopped (an interrupt or a move also ends a read as
// Canceled, and must not run the prompt again).
func retrySetUp(ctx context.Context, err error) bool {
	return ctx.Err() == nil && transient(err)
}

// notSetUp ends a turn the node could not set up: the agent never saw its
// prompt. One to retry returns err with the delivery state as it was
// (no FailedSeq), so the worker runs it again after its back-off (stuck),
// or at once when a reconnect wakes it; the session keeps showing the
// start it reported, as the node will run it. Any other is held
// (holdTurn): what failed needs the user, and the next message retries.
func (t *turn) notSetUp(ctx context.Context, err error, retry bool, exitCode int) error {
	if retry {
		t.lg.Info("turn not set up: the control plane did not answer; it runs again", zap.Error(err))
		t.a.failpoint("node.turn-not-set-up")
		return err
	}
	return t.a.holdTurn(ctx, t.id, t.o, err.Error(), exitCode)
}

// runnerErr is the runner's failure (nil when it did not fail that way).
func (t *turn) runnerErr() *runner.Error {
	var rerr *runner.Error
	if errors.As(t.runErr, &rerr) {
		return rerr
	}
	return nil
}

// abandoned ends a turn stopped because the session is moving (or the node
// is cut off, or stopping): its prompt stays undelivered and its native
// session is rebuilt, since it may hold half a turn.
func (t *turn) abandoned(ctx context.Context) error {
	t.lg.Info("turn abandoned; its prompt will run again")
	_ = t.a.st.session(t.id, func(s *owned) {
		if ns := s.Native[t.o.Agent]; ns != nil {
			ns.Stale = true
		}
	})
	t.a.reportAbandoned(ctx, t.id, t.res.ExitCode)
	return nil
}

// completed records a turn whose native session holds its prompt (it ran
// to the end, or was interrupted after the agent took the prompt): the
// prompt is delivered, the native session holds everything up to it and
// the turn's own rows, and the session is idle.
func (t *turn) completed(ctx context.Context) error {
	o, res := t.o, t.res
	if t.runErr != nil {
		t.lg.Info("turn interrupted")
	}
	err := t.a.st.session(t.id, func(s *owned) {
		s.DeliveredSeq = max(s.DeliveredSeq, o.ReceivedSeq)
		if s.NoticeSeq == o.NoticeSeq {
			s.Notice = "" // told
		}
		if s.Native == nil {
			s.Native = map[string]*nativeSession{}
		}
		ns := s.Native[o.Agent]
		// What the resumed native session held before the turn, past its
		// prompt: the rows of an earlier turn stored after a message sent
		// while it ran, which is this turn's prompt. They stay held (else
		// the next turn sent the agent its own answer as a delta). A copy:
		// ns changes below.
		var held func(int64) bool
		if ns != nil && !ns.Stale && ns.ID == res.NativeID {
			before := *ns
			held = before.holds
		}
		if ns == nil || ns.ID != res.NativeID {
			ns = &nativeSession{ID: res.NativeID}
			s.Native[o.Agent] = ns
		}
		// A transcript the CLI emptied of its history is rebuilt from the
		// neutral copy before the next turn.
		ns.Path, ns.Stale, ns.Account = res.NativePath, res.NativeLost, t.fc.Account
		if res.NativeLost {
			t.lg.Warn("the agent's native session lost its history this turn; rebuilding it before the next", zap.String("native", res.NativeID))
		}
		s.Parked = false
		ns.KnownUpto = max(ns.KnownUpto, o.ReceivedSeq, t.sync.newest()) // never backwards
		// It holds everything up to the prompt (the transition saw to
		// that), the turn's own rows and what a rebuild wrote past the
		// prompt, not what others stored meanwhile.
		ns.Missing = t.sync.missing(o.ReceivedSeq, held)
	})
	if err != nil {
		// Memory holds the outcome and recordAgain writes it once it can
		// (a full disk: the turn's earlier, smaller writes fit). The
		// control plane hears it now, so the session does not show a
		// turn running that has ended; a node killed before the write
		// finds the turn's markers on disk and rebuilds, and takes the
		// delivered seq back from the control plane's assignment.
		t.lg.Warn("turn's outcome not written to the node's state yet", zap.Error(err))
	}
	if t.runErr != nil {
		t.a.reportInterrupted(ctx, t.id, res.ExitCode, t.fc, res.Usage)
	} else {
		t.a.reportEnd(ctx, t.id, o, castv1.SessionState_SESSION_STATE_IDLE, "", res.ExitCode, t.fc, res.Usage)
	}
	t.lg.Info("turn finished", zap.Int("emitted", res.Emitted), zap.String("native", res.NativeID))
	return nil
}
