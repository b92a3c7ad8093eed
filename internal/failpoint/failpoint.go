// Package failpoint lets fault tests kill a real cast process at a named
// point (a migration phase boundary, a node's turn before its outcome is
// recorded) with SIGKILL, so the test sees exactly
// what a crash there leaves behind. Points are enabled only through the
// CAST_FAILPOINTS environment variable (a comma-separated list of names);
// without it every point is a no-op.
package failpoint

import (
	"os"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// EnvVar names the enabled points.
const EnvVar = "CAST_FAILPOINTS"

// FromEnv returns the hook for the points named in CAST_FAILPOINTS, or nil
// when none are.
func FromEnv(lg *zap.Logger) func(name string) {
	raw := strings.TrimSpace(os.Getenv(EnvVar))
	if raw == "" {
		return nil
	}
	on := map[string]bool{}
	for _, n := range strings.Split(raw, ",") {
		on[strings.TrimSpace(n)] = true
	}
	lg.Warn("failpoints enabled: this process kills itself at them", zap.String("points", raw))
	return func(name string) {
		if !on[name] {
			return
		}
		lg.Warn("failpoint reached; killing this process", zap.String("point", name))
		_ = lg.Sync()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
