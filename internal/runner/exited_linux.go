package runner

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exited says whether process pid, a child of this one, has exited: it
// waits to be reaped (left to cmd.Wait: WNOWAIT), or cmd.Wait reaped it
// already (ECHILD: no such child any more) and its result is on its way.
// The kernel knows at once, where the goroutine in cmd.Wait may not have
// handed its result on yet.
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// With WNOHANG and no child to report, Linux leaves si_signo 0.
	return (err == nil && info.Signo == int32(unix.SIGCHLD)) || errors.Is(err, unix.ECHILD)
}
