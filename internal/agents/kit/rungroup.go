package kit

import (
	"os/exec"
	"syscall"
	"time"
)

// RunGroup runs cmd in a process group of its own and kills the whole
// group when cmd's context ends and once it has exited: the npm
// launchers and some CLIs leave children (the real binary, helpers)
// that would otherwise outlive the run.
func RunGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind
	}
	return err
}
