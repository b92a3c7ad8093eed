package runner_test

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestStopSignalMidTurn: each real CLI sent a stop signal from outside
// (SIGTERM: a user's kill, a service manager's stop; SIGINT: Ctrl-C;
// SIGHUP: the terminal a node was started from closing) while
// the model holds its request fails the turn as "killed", whatever status
// the CLI exits with, so the node holds the message for the next run. The
// signal goes to the CLI's process group (a service's control-group stop,
// a terminal's Ctrl-C) or to its main pid only (a user's kill). Measured
// on the pinned CLIs: Gemini CLI exits 0 on SIGTERM and SIGINT, Claude
// Code 0 on SIGINT (under load with "Execution error" on stdout), Codex 1
// on SIGINT (its node launcher passes the signal on). Each driver says
// which exit that is (agents.StopExiter). Read as a finished turn, the
// message was marked delivered
// though the model never answered; read as a failure, it was dropped as
// refused. The others die of the signal or exit 128+n (Claude Code and pi
// 143 on SIGTERM), which TestKilledFromOutside pins with scripts; the
// default run keeps the rows each misread exit came from, CAST_MATRIX=full
// runs every agent, signal and target. SIGHUP, measured the same way on
// 2026-12-07 (every agent, both targets): Gemini CLI exits 0 (its stop
// exit), the others die of it or exit 129; each was read as killed
// already, so its rows run with CAST_MATRIX=full only.
func TestStopSignalMidTurn(t *testing.T) {
	defaults := []string{"claude/INT/group", "codex/INT/group", "codex/INT/pid", "gemini/TERM/group", "gemini/INT/pid"}
	for _, c := range cases {
		for _, s := range []struct {
			name string
			sig  syscall.Signal
		}{{"TERM", syscall.SIGTERM}, {"INT", syscall.SIGINT}, {"HUP", syscall.SIGHUP}} {
			for _, group := range []bool{true, false} {
				name := c.agent + "/" + s.name + "/pid"
				if group {
					name = c.agent + "/" + s.name + "/group"
				}
				if !agenttest.InMatrix(name, defaults...) {
					continue
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					fake := fakemodel.Start(t)
					proxy := startProxy(t, fake.URL)
					const prompt = "STOPSIGNAL this reply never comes"
					held := make(chan struct{}, 1)
					// The prompt's request is held, so the signal comes
					// while the model request is in flight.
					proxy.setDelay(func(body []byte) time.Duration {
						if !bytes.Contains(body, []byte("STOPSIGNAL")) {
							return 0
						}
						select {
						case held <- struct{}{}:
						default:
						}
						return 90 * time.Second
					})
					r, turn := setup(t, c, proxy.URL)
					turn.Prompt = prompt
					pids := make(chan int, 1)
					turn.OnStart = func(pid int) { pids <- pid }
					ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
					defer cancel()
					sent := make(chan bool, 1)
					go func() {
						pid := <-pids
						select {
						case <-held:
						case <-ctx.Done():
							sent <- false
							return
						}
						if group {
							pid = -pid
						}
						sent <- syscall.Kill(pid, s.sig) == nil
					}()
					res, err := r.Run(ctx, turn, func(transcript.Message) {})
					t.Logf("SIG%s to the %s: exit %d, reason %q, err %v", s.name, map[bool]string{true: "group", false: "main pid"}[group], res.ExitCode, res.Reason, err)
					if !<-sent {
						t.Fatal("the signal was not sent while the model held the request")
					}
					if res.Reason != runner.ReasonKilled || !errors.Is(err, &runner.Error{Reason: runner.ReasonKilled}) {
						t.Fatalf("SIG%s mid-turn, exit %d: reason %q err %v, want %q", s.name, res.ExitCode, res.Reason, err, runner.ReasonKilled)
					}
					if n := len(fake.Turns()); n != 0 {
						t.Fatalf("the model answered %d turns; the held request must not complete", n)
					}
				})
			}
		}
	}
}
