package runner_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// cpuTime is this process's user and system CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestInterruptGraceIdle: while an interrupted CLI that ignores SIGTERM
// runs out its grace, the runner waits without burning a core. The
// watch loop once kept selecting on the closed ctx.Done(), spinning for
// the whole grace on every interrupt, switch-stop and node shutdown.
// Not parallel: the CPU time measured is the whole test process's.
func TestInterruptGraceIdle(t *testing.T) {
	dir := t.TempDir()
	// The script tells the test through a fifo once SIGTERM is ignored,
	// so the cancel cannot reach it before the trap is set.
	ready := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened read-write, so neither end blocks in open; Close (cleanup)
	// ends a read still waiting.
	fifo, err := os.OpenFile(ready, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fifo.Close() })
	script := filepath.Join(dir, "claude")
	body := "#!/bin/sh\ntrap '' TERM\necho ready > '" + ready + "'\nexec sleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	const grace = 2 * time.Second
	r := &runner.Runner{Bins: map[string]string{"claude": script}, Grace: grace, Poll: 100 * time.Millisecond, Logf: t.Logf}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res runner.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := r.Run(ctx, runner.Turn{Agent: "claude", Home: t.TempDir(), Cwd: t.TempDir(), Prompt: "hi"}, func(transcript.Message) {})
		done <- result{res, err}
	}()
	readyc := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(fifo).ReadString('\n')
		readyc <- err
	}()
	select {
	case err := <-readyc:
		if err != nil {
			t.Fatalf("reading the fifo: %v", err)
		}
	case got := <-done:
		t.Fatalf("the CLI ended before it was ready: %+v %v", got.res, got.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the CLI never said it was ready")
	}

	cpu0, t0 := cpuTime(t), time.Now()
	cancel()
	var got result
	select {
	case got = <-done:
	case <-time.After(grace + 20*time.Second):
		t.Fatal("the turn did not end after the cancel and the grace")
	}
	cpu, wall := cpuTime(t)-cpu0, time.Since(t0)
	t.Logf("interrupted turn: %+v err=%v; %s wall, %s CPU", got.res, got.err, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
	if got.res.Reason != runner.ReasonInterrupted || !errors.Is(got.err, &runner.Error{Reason: runner.ReasonInterrupted}) {
		t.Fatalf("reason %q err %v, want interrupted", got.res.Reason, got.err)
	}
	// The CLI ignored SIGTERM, so the turn lasted the grace: the window
	// measured is one the runner had to wait through.
	if wall < grace {
		t.Fatalf("the turn ended %s after the cancel, before the grace (%s): SIGTERM was not ignored", wall, grace)
	}
	// Waiting only wakes on the poll ticker (20 syncs of an empty
	// transcript); a spinning loop takes about a core for the window.
	if cpu > grace/4 {
		t.Errorf("the runner used %s of CPU in a %s wait for the grace (%s): it spins", cpu, wall.Round(time.Millisecond), grace)
	}
}
