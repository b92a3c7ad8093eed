package devmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/tick"
)

// Node is the dev node: the node binary (Bin, nodebin.Find) run as a child
// of the control plane, with these of its flags. The control plane links
// no node code: the child is the same daemon `node` runs anywhere.
type Node struct {
	Bin           string
	DataDir       string
	Name          string
	Labels        []string
	MetricsListen string // "" off
	AgentsConfig  string // --agents-config; "" none
	IsolatedHomes bool
	FleetAccounts bool
	AgentChecks   bool
	TokenCustody  bool
	Probe         bool
	Adopt         bool
	LogFormat     string
	LogLevel      string
	// Env is the child's environment: the control plane's, less its own
	// secrets (the node hands its environment to the agents it runs).
	Env []string
}

// args is the child's command line for a control plane at addr: every
// setting explicit, so no default or variable of the node's own (CAST_ADDR,
// CAST_JOIN_TOKEN, CAST_AGENT_CHECKS, ...) changes what --dev asked for.
func (n Node) args(addr, caPin string, insecure bool) []string {
	b := strconv.FormatBool
	out := []string{
		"--controlplane", addr, "--ca-pin=" + caPin, "--join-token=", "--insecure=" + b(insecure),
		"--data-dir", n.DataDir, "--name", n.Name, "--metrics-listen=" + n.MetricsListen,
		"--isolated-homes=" + b(n.IsolatedHomes), "--fleet-accounts=" + b(n.FleetAccounts),
		"--agent-checks=" + b(n.AgentChecks), "--token-custody=" + b(n.TokenCustody),
		"--probe=" + b(n.Probe), "--adopt=" + b(n.Adopt), "--agents-config=" + n.AgentsConfig,
		// cast may be built after the dev setup starts (the README does):
		// the node looks for it at each turn rather than once.
		"--cast-bin=", "--find-cast-bin",
		"--exit-with-parent",
		"--log-format", n.LogFormat, "--log-level", n.LogLevel,
	}
	for _, l := range n.Labels {
		out = append(out, "--label", l)
	}
	return out
}

// childStopTimeout bounds the dev node's clean stop before it is killed.
const childStopTimeout = 30 * time.Second

// lockWait bounds the wait for a node of an earlier dev process to let go
// of the data dir.
const lockWait = 30 * time.Second

// child is a running dev node.
type child struct {
	cmd    *exec.Cmd
	stdin  io.Closer     // its lifeline: closing it (or our death) stops it
	exited chan struct{} // closed when it has exited; err is then set
	err    error
}

// startChild starts the dev node. It stays in the control plane's process
// group, so a signal to the group (Ctrl-C, a supervisor's kill) reaches
// both; and it exits by itself when its stdin closes, which the kernel
// does when the control plane dies in any way (kill -9 included, on Linux
// and macOS alike). Its log goes to the control plane's stderr.
func startChild(ctx context.Context, n Node, addr, caPin string, insecure bool, lg *zap.Logger) (*child, error) {
	if err := waitDirFree(ctx, n.DataDir, lg); err != nil {
		return nil, err
	}
	cmd := exec.Command(n.Bin, n.args(addr, caPin, insecure)...)
	cmd.Env = n.Env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the dev node %s: %w", n.Bin, err)
	}
	lg.Info("dev node started; its log joins this one", zap.String("bin", n.Bin), zap.Int("pid", cmd.Process.Pid))
	c := &child{cmd: cmd, stdin: w, exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	return c, nil
}

// stop asks the node to stop by closing its lifeline, and waits for it,
// killing it after childStopTimeout. No signal: after a Ctrl-C the node
// has one already, and a second would kill it at once (cmdrun.Execute).
func (c *child) stop(lg *zap.Logger) {
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(childStopTimeout):
		lg.Warn("the dev node did not stop; killing it", zap.Int("pid", c.cmd.Process.Pid))
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// waitDirFree waits until no process holds dir's lock: the node of a dev
// process killed a moment ago is still stopping (its stdin closed) and
// holds it until it has.
func waitDirFree(ctx context.Context, dir string, lg *zap.Logger) error {
	try := func() error {
		l, err := fsutil.LockDir(dir)
		if err == nil {
			l.Unlock()
		}
		return err
	}
	err := try()
	if !errors.Is(err, fsutil.ErrLocked) {
		return err
	}
	lg.Info("waiting for the previous dev node to stop", zap.Error(err))
	wctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	tick.Every(wctx, 100*time.Millisecond, func() bool {
		err = try()
		return errors.Is(err, fsutil.ErrLocked)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
