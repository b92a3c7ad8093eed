package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Run runs `git -C dir ARGS` with safe settings and returns stdout; other
// packages that drive git (internal/treemove) share it so every git cast
// runs is hardened the same way. Config that could run programs while
// reading a repository someone else controls (fsmonitor hooks, external
// diff, signature checks) is switched off on the command line. env is
// added after the cleaned environment, so it may set GIT_INDEX_FILE or
// commit identities; it must not come from user input. Errors are *Error
// without a Path; timeout <= 0 means DefaultTimeout.
func Run(ctx context.Context, dir string, timeout time.Duration, env []string, args ...string) ([]byte, error) {
	return RunInput(ctx, dir, timeout, env, nil, args...)
}

// RunInput is Run with stdin: commands that take many refs or updates at
// once (`update-ref --stdin`) read them there, one git process instead of
// one per ref.
func RunInput(ctx context.Context, dir string, timeout time.Duration, env []string, stdin []byte, args ...string) ([]byte, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"--no-pager", "-C", dir,
		"-c", "core.fsmonitor=false", "-c", "core.pager=cat", "-c", "log.showSignature=false",
		"-c", "diff.external=", "-c", "color.ui=false",
	}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(gitEnv(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = time.Second
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	name := subcommand(args)
	if errors.Is(err, exec.ErrNotFound) {
		return nil, &Error{Kind: KindNoGit, Msg: "git is not installed (not found on PATH)", Err: err}
	}
	if ctx.Err() == context.DeadlineExceeded {
		return stdout.Bytes(), &Error{Kind: KindTimeout, Msg: fmt.Sprintf("git %s did not finish within %s", name, timeout), Err: ctx.Err()}
	}
	msg := strings.TrimSpace(stderr.String())
	switch {
	case strings.Contains(msg, "not a git repository"):
		return stdout.Bytes(), &Error{Kind: KindNotRepo, Msg: "is not inside a git repository", Err: err}
	case strings.Contains(msg, "dubious ownership") || strings.Contains(msg, "safe.directory"):
		return stdout.Bytes(), &Error{Kind: KindUntrusted, Msg: "git refuses a repository owned by someone else; add it with `git config --global --add safe.directory DIR`", Err: err}
	case strings.Contains(msg, "must be run in a work tree"):
		return stdout.Bytes(), &Error{Kind: KindNotRepo, Msg: "is not a git work tree", Err: err}
	}
	if msg == "" {
		msg = err.Error()
	}
	return stdout.Bytes(), &Error{Kind: KindGit, Msg: fmt.Sprintf("git %s: %s", name, problem(msg)), Err: err}
}

// problem is the line of git's stderr that says what failed: its first
// "fatal:" or "error:" line, else its first line. Git may print progress
// first (`git worktree add` starts with "Preparing worktree (new branch
// 'x')"), and that line alone told nobody why the command failed.
func problem(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "fatal:") || strings.HasPrefix(l, "error:") {
			return l
		}
	}
	return strings.TrimSpace(lines[0])
}

// subcommand names the git command in args for messages, skipping the
// `-c key=value` options a caller may put before it.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return "(no command)"
}
