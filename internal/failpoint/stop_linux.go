package failpoint

import (
	"os"
	"runtime"
	"syscall"
)

// stopHere stops the process before the calling goroutine goes on; SIGCONT
// continues it from here. The signal goes to this thread: sent to the
// process, another thread took it (the main one, woken from its sleep) and
// this one ran on meanwhile, a report it was to hold back landing first.
func stopHere() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
