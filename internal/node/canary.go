package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/canary"
	"github.com/cast-dev/cast/internal/capability"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/tick"
)

// checkAgents runs the conformance canary (internal/canary) for each
// installed agent version nobody has checked yet: at start, and whenever
// a look at the agents (every ReadinessInterval) finds a new version. One
// CLI at a time, in the background; turns are not held for it. A version
// whose verdicts could not be recorded is tried again at the next look.
func (a *Daemon) checkAgents(ctx context.Context) {
	// Each check's throwaway HOME goes under one folder, emptied first: a
	// node killed mid-check leaves nothing behind for long.
	dir := filepath.Join(a.cfg.DataDir, "canary")
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		a.lg.Warn("no folder for agent checks; none run", zap.String("dir", dir), zap.Error(err))
		return
	}
	done := map[string]bool{} // agent@version checked, here or elsewhere
	look := func() bool {
		for _, in := range a.cfg.Readiness() {
			key := in.Name + "@" + in.Version
			if in.Version == "" || in.Path == "" || done[key] || !capability.Checkable(in.Name) {
				continue
			}
			if err := a.checkAgent(ctx, in, dir); err != nil {
				if ctx.Err() == nil {
					a.lg.Warn("agent check not recorded; trying again later", zap.String("agent", in.Name), zap.String("version", in.Version), zap.Error(err))
				}
				continue
			}
			done[key] = true
		}
		return true
	}
	look()
	tick.Every(ctx, a.cfg.ReadinessInterval, look)
}

// checkAgent checks one installed version unless it has verdicts already.
func (a *Daemon) checkAgent(ctx context.Context, in *castv1.AgentInstall, dir string) error {
	have, err := a.cli.AllAgentChecks(ctx, &castv1.ListAgentChecksRequest{Agent: in.Name})
	if err != nil {
		return err
	}
	for _, c := range have {
		if c.Version == in.Version {
			return nil
		}
	}
	a.lg.Info("checking agent CLI", zap.String("agent", in.Name), zap.String("version", in.Version), zap.String("bin", in.Path))
	c := &canary.Checker{Dir: dir, Logf: func(f string, args ...any) { a.lg.Debug(fmt.Sprintf(f, args...)) }}
	res, err := c.Run(ctx, in.Name, in.Path)
	if err != nil {
		return err
	}
	if _, err := a.cli.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Node: a.cfg.Name, Checks: capability.Verdicts(res)}); err != nil {
		return err
	}
	if failed := res.Failed(); len(failed) > 0 {
		a.lg.Warn("agent CLI failed conformance checks; moves into it become handoffs", zap.String("agent", in.Name), zap.String("version", in.Version), zap.Strings("failed", failed))
	} else {
		a.lg.Info("agent CLI passed its checks", zap.String("agent", in.Name), zap.String("version", in.Version))
	}
	return nil
}
