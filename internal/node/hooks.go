package node

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// turnSetup is a turn being prepared: what the prepare hooks read, and the
// runner.Turn they fill in.
type turnSetup struct {
	id       string
	o        owned // the session as the turn found it (cwd follows a worktree)
	firstSeq int64 // the prompt's first user message
	prompt   string
	account  string // the fleet account the turn runs on ("" for none)
	tryFork  bool   // a fork's first turn may fork the parent's native session
	rt       runner.Turn
	// rebuilt are the seqs of the rows a rebuilt native session holds
	// from the prompt's first message on (rebuildHistory): an answer
	// stored after the prompt, as a turn a move abandoned stores it. The
	// native session holds them though the turn stores none of them.
	rebuilt []int64
}

// prepareHook is one side job of setting a turn up, with a name for the
// log. A hook that fails stops the turn before the agent sees its prompt
// (holdTurn keeps the prompt for the next turn).
type prepareHook struct {
	name string
	run  func(a *Daemon, ctx context.Context, s *turnSetup) error
}

// prepareHooks run in this order before every turn (the way Nomad's task
// runner runs its prestart hooks): the agent's credentials and
// environment, the session's checkout, its worktree, the agent's home and
// cast's MCP server, then how the conversation reaches the native session.
var prepareHooks = []prepareHook{
	{"credentials", (*Daemon).credentialsHook},
	{"checkout", (*Daemon).checkoutHook},
	{"worktree", (*Daemon).worktreeHook},
	{"mcp", (*Daemon).mcpHook},
	{"native", (*Daemon).nativeHook},
}

// turnHook is a side job of the turn outside its preparation, with a name
// for the log; each part is optional and runs at its phase (Nomad's
// poststart and exited hooks):
//
//	queued   before the start report
//	running  before the CLI starts
//	ended    after it: claims the outcome when it is the hook's (ok)
//	settle   records the outcome settles (one ended claimed) instead of
//	         the turn's own settle
type turnHook struct {
	name    string
	queued  func(t *turn)
	running func(t *turn)
	ended   func(t *turn) (outcome, bool)
	settles outcome
	settle  func(t *turn, ctx context.Context) error
}

// turnHooks run in this order at each phase: custody binds the turn to the
// fleet account custody keeps in the agent's shared store (custody.go),
// limits has fleet turns report usage windows and parks a turn that hit a
// usage limit (limits.go). A func, not a var: parking wakes the session's
// worker, which walks turns (an initialization cycle).
func turnHooks() []turnHook {
	return []turnHook{
		{name: "custody", queued: (*turn).custodyQueued},
		{name: "limits", running: (*turn).limitsRunning, ended: (*turn).limitsEnded, settles: outParked, settle: (*turn).park},
	}
}

// runHooks runs the part job picks of each turn hook that has one.
func (t *turn) runHooks(phase turnPhase, job func(turnHook) func(*turn)) {
	for _, h := range turnHooks() {
		if f := job(h); f != nil {
			t.lg.Debug("turn hook", zap.String("hook", h.name), zap.Stringer("phase", phase))
			f(t)
		}
	}
}

// hookOutcome is the outcome a turn hook claims, if one does.
func (t *turn) hookOutcome() (outcome, bool) {
	for _, h := range turnHooks() {
		if h.ended == nil {
			continue
		}
		if out, ok := h.ended(t); ok {
			return out, true
		}
	}
	return 0, false
}

// prepareTurn runs the prepare hooks: it decides between resuming the
// agent's native session, a rebuild from the neutral copy, and a fresh
// native session; with tryFork, a fork's first turn may fork the parent's
// native session (fork.go). account is the fleet account the turn runs on:
// a native session another account wrote, where the agent binds it to that
// account, is rebuilt. The setup is returned on an error too: its rt is
// the turn as far as it was set up.
func (a *Daemon) prepareTurn(ctx context.Context, sessionID string, o owned, firstSeq int64, prompt, account string, tryFork bool) (*turnSetup, error) {
	s := &turnSetup{id: sessionID, o: o, firstSeq: firstSeq, prompt: prompt, account: account, tryFork: tryFork}
	for _, h := range prepareHooks {
		if err := h.run(a, ctx, s); err != nil {
			a.lg.Info("turn not set up", zap.String("session", sessionID), zap.String("hook", h.name), zap.Error(err))
			return s, err
		}
	}
	return s, nil
}

// credentialsHook builds the turn from the agent's setup for the
// session's account. CAST_SESSION, CAST_ADDR and the node's credential
// (CAST_TOKEN_FILE, or CAST_CA_PIN and CAST_CLIENT_CERT with TLS) let the
// agent call cast about its own session (`cast spawn --subagent`, `cast
// read`).
func (a *Daemon) credentialsHook(_ context.Context, s *turnSetup) error {
	setup, err := a.cfg.accountSetup(s.o.Agent, s.o.Account)
	if err != nil {
		return err
	}
	env := append([]string{}, setup.Env...)
	for k, v := range a.castEnv(s.id) {
		env = append(env, k+"="+v)
	}
	s.rt = a.cfg.newTurn(s.o.Agent, setup, env)
	s.rt.Model, s.rt.Effort, s.rt.Cwd, s.rt.Prompt = s.o.Model, s.o.Effort, s.o.Cwd, s.prompt
	return nil
}

// checkoutHook refuses a turn whose folder is not on this node.
func (a *Daemon) checkoutHook(_ context.Context, s *turnSetup) error {
	if fi, err := os.Stat(s.rt.Cwd); s.rt.Cwd == "" || err != nil || !fi.IsDir() {
		if len(s.o.Native) > 0 && s.o.Native[s.o.Agent] == nil {
			return fmt.Errorf("No local checkout for agent switch: %q does not exist on node %s", s.o.Cwd, a.cfg.Name)
		}
		return fmt.Errorf("no local checkout: %q does not exist on node %s", s.o.Cwd, a.cfg.Name)
	}
	return nil
}

// worktreeHook makes (or finds) the session's git worktree and runs the
// turn in it.
func (a *Daemon) worktreeHook(ctx context.Context, s *turnSetup) error {
	if s.o.WorktreeBranch == "" {
		return nil
	}
	dir, made, err := a.ensureWorktree(ctx, s.o.Cwd, s.o.WorktreeBranch)
	if err != nil {
		return err
	}
	if made {
		a.startSetup(s.id, dir)
	}
	if dir != s.o.Cwd {
		if err := a.st.session(s.id, func(o *owned) { o.Cwd = dir }); err != nil {
			return err
		}
		s.o.Cwd, s.rt.Cwd = dir, dir // reported with the turn's state (sessionCwd)
	}
	return nil
}

// mcpHook makes the agent's home and registers cast's MCP server for the
// turn.
func (a *Daemon) mcpHook(_ context.Context, s *turnSetup) error {
	if err := os.MkdirAll(s.rt.Home, 0o700); err != nil {
		return err
	}
	return a.registerMCP(&s.rt, s.id)
}

// nativeHook decides how the conversation reaches the agent's native
// session (delivery.Transition): resume it as it is, resume it with what it
// missed, fork the parent's, or write it from the neutral copy.
func (a *Daemon) nativeHook(ctx context.Context, s *turnSetup) error {
	before := s.firstSeq - 1
	ns := s.o.Native[s.o.Agent]
	if ns.boundElsewhere(s.o.Agent, s.account) {
		// The fleet switched accounts since this native session's last
		// turn: resuming it would send the old account's encrypted items.
		a.lg.Info("native session bound to another fleet account; rebuilding", zap.String("session", s.id),
			zap.String("agent", s.o.Agent), zap.String("was", ns.Account), zap.String("now", s.account))
		ns = &nativeSession{ID: ns.ID, Path: ns.Path, KnownUpto: ns.KnownUpto, Stale: true}
	}
	if s.tryFork && ns == nil {
		if ft, ok := a.nativeForkTurn(ctx, s.id, s.o, s.firstSeq, s.account, s.rt); ok {
			s.rt = ft
			return nil
		}
	}
	if ns != nil && !ns.Stale && ns.holdsUpTo(before) {
		s.rt.NativeID, s.rt.NativePath = ns.ID, ns.Path // reuse, without reading the history
		return nil
	}
	history, err := a.history(ctx, s.id, before)
	if err != nil {
		return err
	}
	in := delivery.Input{Content: delivery.ContentSeqs(history)}
	if ns != nil && !ns.Stale {
		in.Native, in.Missing = &delivery.Row{NativeID: ns.ID, Path: ns.Path, KnownUpto: ns.KnownUpto}, ns.Missing
	}
	ag, _ := agents.Lookup(s.o.Agent)
	in.CanReconstitute = ag.Caps.CanReconstitute
	d := delivery.Transition(in)
	switch d.Kind {
	case delivery.Fresh:
	case delivery.Reuse:
		s.rt.NativeID, s.rt.NativePath = ns.ID, ns.Path
	case delivery.Delta, delivery.Seed:
		// Only what the agent missed, framed as history, before the prompt.
		sl := delivery.Slice(in.MissedMessages(d, history), delivery.SliceOptions{SessionID: s.id, ContextWindow: ag.ContextWindow,
			Heading: "What happened in this session while you were not running it"})
		if sl.Text != "" {
			s.rt.Prompt = sl.Text + "\n\n" + s.prompt
		}
		if d.Kind == delivery.Delta {
			s.rt.NativeID, s.rt.NativePath = ns.ID, ns.Path
		}
	default:
		return a.rebuildNative(ctx, s, ns, history)
	}
	return nil
}

// rebuildNative writes the agent's native transcript from the neutral
// copy (history: the messages before the prompt) and points the turn at it.
func (a *Daemon) rebuildNative(ctx context.Context, s *turnSetup, ns *nativeSession, history []transcript.Message) error {
	if err := agents.CheckTakeover(s.o.Agent, true); err != nil {
		return err
	}
	// A writer that runs the CLI (opencode import) gets the turn's own
	// environment: its HOME and config dirs hold the agent's settings.
	w, err := agents.WriterFor(s.o.Agent, a.cfg.agentSetup(s.o.Agent).Bin, runner.Env(s.rt))
	if err != nil {
		return err
	}
	// A new id for an agent whose forks read this file (rebuildNativeID).
	target := agents.Target{Home: s.rt.AgentDir(), Cwd: s.o.Cwd, SessionID: s.id, Model: s.o.Model,
		NativeID: rebuildNativeID(s.o.Agent, ns, s.rt.UserEnv != nil)}
	full, err := a.rebuildHistory(ctx, s.id, s.o, s.firstSeq, history)
	if err != nil {
		return err
	}
	written, err := w.Write(target, full)
	if err != nil {
		return fmt.Errorf("rebuild the %s transcript: %w", s.o.Agent, err)
	}
	s.rt.NativeID, s.rt.NativePath = written.NativeID, written.Path
	for _, m := range full {
		if m.Seq >= s.firstSeq {
			s.rebuilt = append(s.rebuilt, m.Seq)
		}
	}
	return nil
}
