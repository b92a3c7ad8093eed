package node

import (
	"context"
	"errors"
	"slices"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/runner"
)

// resumeMissed says whether a resumed turn failed because the CLI could
// not find or read its native session (runner.ReasonNoSession, as the
// runner classifies the CLI's message) before it ran anything. That is no
// refusal: the neutral copy still has the history.
func resumeMissed(t runner.Turn, res runner.Result, err error) bool {
	var re *runner.Error
	return t.ForkOf == "" && (t.NativeID != "" || t.NativePath != "") && res.Emitted == 0 &&
		errors.As(err, &re) && re.Reason == runner.ReasonNoSession
}

// rerunStale marks the agent's native session stale and runs the turn
// once more on a native session rebuilt from the neutral copy, so the
// prompt is delivered rather than dropped. It returns the new run's
// outcome (a rerun that could not be set up is rerunNotSetUp: the prompt
// is held).
func (a *Daemon) rerunStale(ctx context.Context, sessionID string, o owned, firstSeq int64, prompt, account string, failed runner.Turn,
	sy *syncer, runErr error) (runner.Result, error) {
	a.lg.Warn("native session not found on resume; rebuilding it", zap.String("session", sessionID), zap.String("agent", o.Agent),
		zap.String("native", failed.NativeID), zap.Error(runErr))
	if err := a.st.session(sessionID, func(s *owned) {
		if s.Native[o.Agent] != nil {
			s.Native[o.Agent].Stale = true
		}
	}); err != nil {
		return runner.Result{ExitCode: -1}, rerunNotSetUp{err: err}
	}
	if s, ok := a.st.get(sessionID); ok {
		o.Native = s.Native
	}
	return a.rerun(ctx, sessionID, o, firstSeq, prompt, account, failed, sy)
}

// rerun sets the turn up anew on a rebuilt history and runs it in place of
// first, the one turn that did not run (rerunStale's, rerunRebuilt's). The
// new turn keeps what first gave after its set-up, the process group's
// record (OnStart), fleet usage (ReportUsage) and the turn's token
// (CAST_TURN), by which a node killed while the rerun's CLI runs finds it
// on restart; the syncer takes the new native id.
func (a *Daemon) rerun(ctx context.Context, sessionID string, o owned, firstSeq int64, prompt, account string, first runner.Turn,
	sy *syncer) (runner.Result, error) {
	set, err := a.prepareTurn(ctx, sessionID, o, firstSeq, prompt, account, false)
	if err != nil {
		return runner.Result{ExitCode: -1}, notSetUpRerun(ctx, err)
	}
	t := set.rt
	t.OnStart, t.ReportUsage = first.OnStart, first.ReportUsage
	if token := runner.EnvValue(first.Env, turnTokenEnv); token != "" {
		t.Env = append(slices.Clip(t.Env), turnTokenEnv+"="+token)
	}
	sy.rekey(t.NativeID, set.rebuilt)
	return a.runner.Run(ctx, t, sy.emit)
}
