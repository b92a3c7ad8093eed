package agenttest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DefaultTimeout bounds a CLI run when ctx has no deadline. The CLIs take 2-12 s
// per turn against the fake; some hang forever on a bad transcript instead of
// failing, so every run needs a ceiling.
const DefaultTimeout = 120 * time.Second

// Result is what a CLI run produced.
type Result struct {
	Stdout   string
	Stderr   string
	ExitCode int  // -1 when the process did not exit on its own
	TimedOut bool // killed because ctx ended
}

// Run runs bin with args (no shell) in dir with exactly env, stdin from
// /dev/null (codex exec waits for stdin otherwise). On timeout the whole
// process group is killed: the npm launchers spawn the real binary as a child,
// and killing only the launcher would leave it running. A run that could not
// start fails the test; a non-zero exit does not, the caller decides.
func Run(t testing.TB, ctx context.Context, bin string, args, env []string, dir string) Result {
	t.Helper()
	return RunInput(t, ctx, bin, args, env, dir, nil)
}

// RunInput is Run with stdin reading input (nil: /dev/null), the way the
// runner hands a prompt to an agent whose Commands.PromptStdin is set.
func RunInput(t testing.TB, ctx context.Context, bin string, args, env []string, dir string, input *string) Result {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Negative pid: the process group Setpgid created.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Grandchildren may hold the output pipes open after the group kill.
	cmd.WaitDelay = 5 * time.Second
	if input != nil {
		cmd.Stdin = strings.NewReader(*input)
	} else if devnull, err := os.Open(os.DevNull); err == nil {
		defer devnull.Close()
		cmd.Stdin = devnull
	}
	start := time.Now()
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: -1}
	if ctx.Err() != nil {
		res.TimedOut = true
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode = 0
	case errors.As(err, &exitErr):
		if !res.TimedOut {
			res.ExitCode = exitErr.ExitCode()
		}
	case res.TimedOut:
	default:
		t.Fatalf("agenttest: start %s: %v", bin, err)
	}
	// Always reap the group: a CLI may leave background helpers behind even on
	// a clean exit (ESRCH when there are none).
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("agenttest: %s %q: exit %d in %s (timed out: %v)", bin, args, res.ExitCode, time.Since(start).Round(time.Millisecond), res.TimedOut)
	return res
}

// MustRun is Run that fails the test unless the CLI exited 0, showing its
// output.
func MustRun(t testing.TB, ctx context.Context, bin string, args, env []string, dir string) Result {
	t.Helper()
	return MustRunInput(t, ctx, bin, args, env, dir, nil)
}

// MustRunInput is RunInput that fails the test on a non-zero exit.
func MustRunInput(t testing.TB, ctx context.Context, bin string, args, env []string, dir string, input *string) Result {
	t.Helper()
	res := RunInput(t, ctx, bin, args, env, dir, input)
	if res.ExitCode != 0 {
		t.Fatalf("agenttest: %s %q failed (exit %d, timed out %v)\nstdout:\n%s\nstderr:\n%s", bin, args, res.ExitCode, res.TimedOut, res.Stdout, res.Stderr)
	}
	return res
}
