// Package failpoint lets fault tests kill a real cast process at a named
// point (a migration phase boundary, a node's turn before its outcome is
// recorded) with SIGKILL, so the test sees exactly
// what a crash there leaves behind, or stop it there (SIGSTOP) until the
// test continues it (SIGCONT), so the test acts while the process is held
// exactly between two of its steps; a stopping point stops the process
// the first time it is reached only, so the test continues it once. Points
// are enabled only through the CAST_FAILPOINTS environment variable (a
// comma-separated list of names, each killing, or stopping with the
// suffix ":stop"); without it every point is a no-op.
package failpoint

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
)

// EnvVar names the enabled points.
const EnvVar = "CAST_FAILPOINTS"

// stopSuffix makes a point stop the process instead of killing it.
const stopSuffix = ":stop"

// FromEnv returns the hook for the points named in CAST_FAILPOINTS, or nil
// when none are.
func FromEnv(lg *zap.Logger) func(name string) {
	raw := strings.TrimSpace(os.Getenv(EnvVar))
	if raw == "" {
		return nil
	}
	stop := map[string]*sync.Once{} // name: stop once (nil: kill)
	for _, n := range strings.Split(raw, ",") {
		n = strings.TrimSpace(n)
		name, stops := strings.CutSuffix(n, stopSuffix)
		stop[name] = nil
		if stops {
			stop[name] = &sync.Once{}
		}
	}
	lg.Warn("failpoints enabled: this process kills or stops itself at them", zap.String("points", raw))
	return func(name string) {
		once, on := stop[name]
		if !on {
			return
		}
		if once != nil {
			once.Do(func() {
				lg.Warn("failpoint reached; stopping this process", zap.String("point", name))
				_ = lg.Sync()
				stopHere()
			})
			return
		}
		lg.Warn("failpoint reached; killing this process", zap.String("point", name))
		_ = lg.Sync()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
