package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// A turn runs in phases, each a function of its own: prepare (the agent,
// its environment and CLI, the driver, the prompt's way in), start (the
// process in its own group, its pipes, the prompt on stdin), watch (the
// native transcript synced while the CLI runs; an interrupt sends SIGTERM,
// then SIGKILL after Grace), reap (the group gone, the pipes drained) and
// finish (the native session, whether it holds the prompt, usage, and how
// the turn ended).

// plan is a prepared turn: everything the process needs.
type plan struct {
	t     Turn
	a     agents.Agent
	env   []string
	bin   string
	d     *driver
	args  []string
	input string // the prompt on stdin (hasInput)
	// hasInput: the CLI reads the prompt on stdin (else /dev/null).
	hasInput bool
	// answered: the last row the turn emitted is the model's text. A CLI
	// stopped mid-turn leaves none after its prompt, tool call or result.
	answered atomic.Bool
}

// prepare builds the turn's plan. Its error is an *Error.
func (r *Runner) prepare(ctx context.Context, t Turn) (*plan, error) {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return nil, &Error{Reason: ReasonUnsupported, Detail: fmt.Sprintf("unknown agent %q", t.Agent)}
	}
	if t.Home == "" || !filepath.IsAbs(t.Home) || !filepath.IsAbs(t.Cwd) {
		return nil, &Error{Reason: ReasonFailed, Detail: "turn needs an absolute Home and Cwd"}
	}
	p := &plan{t: t, a: a, env: buildEnv(a, t)}
	bin, err := r.lookBin(a, p.env)
	if err != nil {
		return nil, &Error{Reason: ReasonBinaryNotFound, Detail: err.Error()}
	}
	p.bin = bin
	if err := ensureDirs(a, p.env); err != nil {
		return nil, &Error{Reason: ReasonFailed, Detail: err.Error()}
	}
	if p.d, err = newDriver(a, t, r.logf); err != nil {
		return nil, asError(err, ReasonFailed)
	}
	// Messages the resumed file already holds are accounted for before the
	// process can touch it.
	p.d.baseline()
	if err := p.d.deliverLarge(ctx, bin, p.env); err != nil {
		if ctx.Err() != nil && !errors.As(err, new(*Error)) {
			return nil, &Error{Reason: ReasonInterrupted}
		}
		return nil, asError(err, ReasonFailed)
	}
	if p.args, err = p.d.args(); err != nil {
		return nil, &Error{Reason: ReasonUnsupported, Detail: err.Error()}
	}
	p.args = append(p.args, t.Args...)
	if e, ok := p.d.ad.(agents.Ephemeral); ok && t.Ephemeral {
		p.args = append(p.args, e.EphemeralArgs()...)
	}
	p.input, p.hasInput = p.d.stdin()
	if why := promptTooLong(a, p.input); why != "" {
		return nil, &Error{Reason: ReasonRefused, Detail: why}
	}
	return p, nil
}

// asError is err as an *Error, with reason when it is not one.
func asError(err error, reason string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Reason: reason, Detail: err.Error()}
}

// proc is the running CLI and its pipes.
type proc struct {
	cmd     *exec.Cmd
	pgid    int
	stdout  *os.File // read end
	stderr  *os.File // read end
	stdinW  *os.File // write end, nil without stdin input
	written chan struct{}
	waited  chan error
}

// start runs the plan's CLI in its own process group and writes the
// prompt to its stdin. Its error is an *Error.
func (r *Runner) start(p *plan) (*proc, error) {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.t.Cwd
	cmd.Env = p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr := &proc{cmd: cmd, written: make(chan struct{}), waited: make(chan error, 1)}
	// stdout is a plain pipe the runner reads itself, so the CLI's exit is
	// seen even if a straggler still holds the write end.
	var stdoutW, stderrW, stdinR *os.File
	var err error
	if pr.stdout, stdoutW, err = os.Pipe(); err != nil {
		return nil, &Error{Reason: ReasonFailed, Detail: err.Error()}
	}
	cmd.Stdout = stdoutW
	if pr.stderr, stderrW, err = os.Pipe(); err != nil {
		closeAll(pr.stdout, stdoutW)
		return nil, &Error{Reason: ReasonFailed, Detail: err.Error()}
	}
	cmd.Stderr = stderrW
	// The prompt goes in on stdin for the CLIs that read it there; the
	// others get /dev/null (codex exec waits on an open pipe).
	if p.hasInput {
		if stdinR, pr.stdinW, err = os.Pipe(); err != nil {
			closeAll(pr.stdout, stdoutW, pr.stderr, stderrW)
			return nil, &Error{Reason: ReasonFailed, Detail: err.Error()}
		}
		cmd.Stdin = stdinR
	}
	err = cmd.Start()
	closeAll(stdoutW, stderrW, stdinR)
	if err != nil {
		closeAll(pr.stdout, pr.stderr, pr.stdinW)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, &Error{Reason: ReasonBinaryNotFound, Detail: err.Error()}
		}
		return nil, &Error{Reason: ReasonFailed, Detail: err.Error()}
	}
	pr.pgid = cmd.Process.Pid
	r.logf("runner: %s started pid %d: %s %q", p.t.Agent, pr.pgid, p.bin, p.args)
	go func() {
		defer close(pr.written)
		if pr.stdinW == nil {
			return
		}
		// Written as the CLI starts (gemini gives up on stdin after 500 ms
		// without a byte) and closed, so the CLI sees its end. A CLI that
		// exits without reading it fails the write: its exit says why.
		if _, err := io.WriteString(pr.stdinW, p.input); err != nil {
			r.logf("runner: %s pid %d: prompt not fully written to stdin: %v", p.t.Agent, pr.pgid, err)
		}
		pr.stdinW.Close()
	}()
	go func() { pr.waited <- cmd.Wait() }()
	return pr, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// output is what the CLI wrote, read while it runs.
type output struct {
	stdoutTail, stderr *tailBuffer
	readDone, errDone  chan struct{}
}

// read consumes the CLI's stdout (parsed by the driver: ids, errors,
// streamed parts; the tail kept for error reports) and stderr.
func (p *plan) read(pr *proc, out func(transcript.Message)) *output {
	o := &output{stdoutTail: &tailBuffer{max: 64 << 10}, stderr: &tailBuffer{max: 64 << 10},
		readDone: make(chan struct{}), errDone: make(chan struct{})}
	go func() {
		defer close(o.readDone)
		p.d.readStdout(pr.stdout, o.stdoutTail, out)
	}()
	go func() {
		defer close(o.errDone)
		_, _ = io.Copy(o.stderr, pr.stderr)
	}()
	return o
}

// emitter is emit with the turn's agent and model filled in, counted in
// res.Emitted; it is called from one goroutine at a time.
func (p *plan) emitter(res *Result, emit func(transcript.Message)) func(transcript.Message) {
	var mu sync.Mutex
	lastModel := p.t.Model
	return func(m transcript.Message) {
		mu.Lock()
		defer mu.Unlock()
		m.Agent = p.a.Name
		p.answered.Store(m.Kind == transcript.KindAssistant)
		// The transcript's model wins; rows without one (tool results,
		// user text) get the model of the turn.
		if m.Model == "" {
			m.Model = lastModel
		} else {
			lastModel = m.Model
		}
		res.Emitted++
		emit(m)
	}
}

// watch syncs the native transcript until the CLI exits; cancelling ctx
// interrupts it (SIGTERM to the group, SIGKILL after Grace). It returns
// whether it was interrupted and the CLI's wait error.
func (r *Runner) watch(ctx context.Context, p *plan, pr *proc, out func(transcript.Message)) (interrupted bool, waitErr error) {
	var killTimer <-chan time.Time
	// done is nil once the interrupt is handled: a closed ctx.Done() is
	// ready on every pass, and kept in the select it would spin the loop
	// at a full core until the CLI exits or the grace runs out.
	done := ctx.Done()
	tick := time.NewTicker(r.poll())
	defer tick.Stop()
	for {
		select {
		case waitErr = <-pr.waited:
			r.logf("runner: %s pid %d exited: %v", p.t.Agent, pr.pgid, waitErr)
			return interrupted, waitErr
		case <-done:
			if exited(pr.pgid) {
				// The CLI had exited on its own before the interrupt came
				// (a node stopped while it ran, SIGSTOP or a sleep, finds
				// itself cut off as it wakes; select picks either of two
				// ready cases): its own outcome stands. Counted as an
				// interrupt, a turn whose answer was stored was abandoned
				// and its prompt run again.
				waitErr = <-pr.waited
				r.logf("runner: %s pid %d exited before the interrupt: %v", p.t.Agent, pr.pgid, waitErr)
				return false, waitErr
			}
			interrupted = true
			done = nil
			r.logf("runner: %s pid %d interrupted: SIGTERM to the group", p.t.Agent, pr.pgid)
			_ = syscall.Kill(-pr.pgid, syscall.SIGTERM)
			killTimer = time.After(r.grace())
		case <-killTimer:
			r.logf("runner: %s pid %d still running after %s: SIGKILL", p.t.Agent, pr.pgid, r.grace())
			_ = syscall.Kill(-pr.pgid, syscall.SIGKILL)
			killTimer = nil
		case <-tick.C:
			p.d.sync(false, out)
		}
	}
}

// reap ends what is left of the turn's process group and drains its
// output.
func (r *Runner) reap(p *plan, pr *proc, o *output) {
	// Helpers the CLI left behind (npm launchers, shells of a killed tool)
	// go with the group.
	_ = syscall.Kill(-pr.pgid, syscall.SIGKILL)
	waitGroupGone(pr.pgid, 2*time.Second)
	if pr.stdinW != nil {
		pr.stdinW.Close() // a reader outside the group must not hold the writer
	}
	<-pr.written
	// The rest of stdout (codex's last events, opencode's last parts) and
	// stderr; a process outside the group holding the pipes is cut off.
	drain := time.NewTimer(3 * time.Second)
	defer drain.Stop()
	for _, done := range []<-chan struct{}{o.readDone, o.errDone} {
		select {
		case <-done:
			continue
		case <-drain.C:
		}
		r.logf("runner: %s pid %d: output still open after exit; closing it", p.t.Agent, pr.pgid)
		closeAll(pr.stdout, pr.stderr)
		<-o.readDone
		<-o.errDone
		break
	}
	closeAll(pr.stdout, pr.stderr)
}

// finish fills in how the turn ended: exit code, the native session,
// whether it holds the prompt, usage, and the failure if any.
func (r *Runner) finish(p *plan, res *Result, waitErr error, interrupted bool, o *output, out func(transcript.Message)) (Result, error) {
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		res.ExitCode = 0
	case errors.As(waitErr, &exitErr):
		res.ExitCode = exitErr.ExitCode() // -1 when killed by a signal
	}
	res.Stderr = o.stderr.String()
	p.d.sync(true, out)
	res.NativeID, res.NativePath = p.d.native()
	p.d.tidy(res.NativeID)
	res.PromptSeen, res.NativeLost = p.d.promptSeen(), p.d.nativeLost()
	if interrupted && !res.PromptSeen && res.NativeID != "" {
		var err error
		res.PromptSeen, err = p.d.storeHolds(p.bin, p.env)
		res.NativeUnread = err != nil
	}
	if p.t.ReportUsage {
		res.Usage = p.d.usage(res.NativePath)
	}
	if interrupted {
		return fail(*res, ReasonInterrupted, "")
	}
	if sig, ok := killedFromOutside(waitErr); ok {
		return fail(*res, ReasonKilled, fmt.Sprintf("the CLI was killed by signal %d (%v), which cast did not send: out of memory, someone killed it, or a stop of the node's service", int(sig), sig))
	}
	reason, detail := p.d.classify(res.ExitCode, res.Emitted, o.stdoutTail.String(), res.Stderr)
	// A CLI that catches a stop signal and exits 0 or 1 (Gemini CLI,
	// Claude Code on SIGINT, Codex on SIGINT) read as a finished turn (the
	// message marked delivered, unanswered) or as a refusal (dropped). Its
	// driver knows that exit; a failure the CLI printed keeps its reason.
	if (reason == "" || reason == ReasonFailed) && !p.answered.Load() && p.d.stoppedExit(res.ExitCode, o.stdoutTail.String(), res.Stderr) {
		return fail(*res, ReasonKilled, fmt.Sprintf("the CLI exited %d before the model answered, as %s does when a stop signal from outside (SIGTERM, SIGINT, SIGHUP) ends it: someone stopped it, or a stop of the node's service", res.ExitCode, p.a.DisplayName))
	}
	if reason != "" {
		return fail(*res, reason, detail)
	}
	if res.NativeID == "" && !p.t.Ephemeral {
		return fail(*res, ReasonFailed, "the CLI exited 0 but no native session was found: "+clip(lastLines(o.stdoutTail.String()+res.Stderr, 5), 500))
	}
	return *res, nil
}

// killedFromOutside is the signal that killed the CLI when it is one that
// stops a process from outside: the kernel's OOM killer (SIGKILL), a
// user's kill or a shutdown (SIGTERM, SIGINT, SIGHUP). The CLI did not
// refuse its prompt then. A CLI that catches the signal and exits
// 128+n, as a shell reports a child the signal ended, was ended by it
// too: Claude Code exits 143 on SIGTERM, which read as a refusal, so a
// kill of it (or a service manager's stop of the node with its CLIs)
// dropped the message. A crash (SIGSEGV, SIGABRT) is the CLI's own
// failure, which the prompt may cause, and is not one. The runner's own
// signals (an interrupt) are told apart before this is asked.
func killedFromOutside(waitErr error) (syscall.Signal, bool) {
	var exitErr *exec.ExitError
	if !errors.As(waitErr, &exitErr) {
		return 0, false
	}
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	if !ok {
		return 0, false
	}
	sig := ws.Signal()
	if !ws.Signaled() {
		if !ws.Exited() || ws.ExitStatus() <= 128 {
			return 0, false
		}
		sig = syscall.Signal(ws.ExitStatus() - 128)
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
		return sig, true
	}
	return 0, false
}
