package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/transcript"
)

// ProbePrompt is what a probe asks: the cheapest answer a model gives.
const ProbePrompt = "Reply with the single word OK."

// DefaultProbeTimeout bounds one probe.
const DefaultProbeTimeout = 60 * time.Second

// ProbeResult is what running an agent's CLI once says about whether it
// can run a turn.
type ProbeResult struct {
	Ready bool
	// Reason is the failed turn's reason (Reason*) when not Ready.
	Reason string
	// Said is the CLI's own words when not Ready (e.g. Claude's "Not
	// logged in · Please run /login"), else what went wrong.
	Said string
	// NativeID is the session the probe made and removed ("" when the CLI
	// kept none), for logs.
	NativeID string
}

// Probe runs t, a turn of an agent set up as the node runs its turns
// (Home, UserEnv, Env, Args; no session), once with ProbePrompt in a
// fresh folder under scratch, bounded by timeout (DefaultProbeTimeout when
// 0). A CLI that can keep no session is told so (agents.Ephemeral);
// otherwise the native session it made, and the CLI's folders for that
// cwd, are removed afterwards (the agent's RemoveScratch), so a probe
// never shows in the user's history. The error says only that they could
// not be, and where they were left.
func (r *Runner) Probe(ctx context.Context, t Turn, scratch string, timeout time.Duration) (ProbeResult, error) {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return ProbeResult{Reason: ReasonFailed, Said: "no folder to probe in: " + err.Error()}, nil
	}
	cwd, err := os.MkdirTemp(scratch, t.Agent+"-")
	if err != nil {
		return ProbeResult{Reason: ReasonFailed, Said: "no folder to probe in: " + err.Error()}, nil
	}
	defer os.RemoveAll(cwd)
	t.Cwd, t.Prompt, t.NativeID, t.NativePath, t.ForkOf, t.ForkPath = cwd, ProbePrompt, "", "", "", ""
	t.Ephemeral = true
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, runErr := r.Run(runCtx, t, func(transcript.Message) {})
	out := probeResult(runCtx, res, runErr, timeout)
	out.NativeID = res.NativeID
	// Not under runCtx: a probe that timed out still cleans up.
	rmCtx, rmCancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer rmCancel()
	a, _ := agents.Lookup(t.Agent)
	env := Env(t)
	bin, _ := r.lookBin(a, env)
	target := agents.Target{Home: t.AgentDir(), Cwd: cwd}
	// Tried a few times: the CLI just stopped (a timed-out probe's, by a
	// signal) may still hold its store for a moment, and OpenCode's
	// `session delete` then fails with "database is locked". Each try
	// lists the store again, so one that removed part leaves the rest.
	err = retry.Do(rmCtx, removePolicy, func() error {
		return a.RemoveScratch(rmCtx, bin, env, target, res.NativeID, res.NativePath)
	}, nil)
	if err != nil {
		return out, fmt.Errorf("the probe's session %s (%s) was not removed: %w", res.NativeID, res.NativePath, err)
	}
	return out, nil
}

// removePolicy bounds the tries at a probe's clean-up: about 6 s of pauses.
var removePolicy = retry.Policy{Min: 250 * time.Millisecond, Max: 2 * time.Second, Tries: 6}

// probeResult reads a probe turn's end.
func probeResult(ctx context.Context, res Result, err error, timeout time.Duration) ProbeResult {
	if err == nil {
		return ProbeResult{Ready: true}
	}
	var e *Error
	if !errors.As(err, &e) {
		return ProbeResult{Reason: ReasonFailed, Said: err.Error()}
	}
	out := ProbeResult{Reason: e.Reason, Said: e.Detail}
	switch {
	case e.Reason == ReasonInterrupted && errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.Said = fmt.Sprintf("no answer within %s", timeout)
	case out.Said == "":
		out.Said = e.Reason
	}
	return out
}
