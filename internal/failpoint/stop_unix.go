//go:build unix && !linux

package failpoint

import (
	"os"
	"syscall"
)

// stopHere stops the process (SIGCONT continues it). Without Linux's
// per-thread signal another thread may take the stop and this goroutine
// run on for a moment first (see stop_linux.go); the fault tests that
// rely on the exact point run on Linux.
func stopHere() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
