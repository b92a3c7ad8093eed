// Package cmdrun is what the daemons' main packages (cmd/controlplane,
// cmd/node) share: their root cobra command and its --version, the logger
// it runs with, signals, the exit code, defaults from the environment, and
// the lifeline of a daemon another process started.
package cmdrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/logging"
	"github.com/cast-dev/cast/internal/version"
)

// Daemon completes a daemon's root command (its Use, Short and RunE set)
// and returns it: no arguments; `--version` prints "USE VERSION"; errors
// and usage are left to Execute (one line on stderr, no usage dump).
func Daemon(cmd *cobra.Command) *cobra.Command {
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.Args = cobra.NoArgs
	cmd.Version = version.Get().String()
	cmd.SetVersionTemplate(cmd.Name() + " {{.Version}}\n")
	return cmd
}

// Logged is a RunE that makes the logger of the format and level format
// and level give when the command runs (after its flags are parsed),
// hands it to run and syncs it at the end.
func Logged(format, level func() string, run func(cmd *cobra.Command, lg *zap.Logger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		lg, err := logging.New(format(), level())
		if err != nil {
			return err
		}
		defer lg.Sync() //nolint:errcheck
		return run(cmd, lg)
	}
}

// Execute runs cmd and exits: SIGINT or SIGTERM cancels its context (the
// daemon stops cleanly) and a second one kills at once; an error is
// printed as "name: error" and exits 1.
func Execute(cmd *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }() // a second signal kills at once
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.Name(), err)
		os.Exit(1)
	}
}

// EnvOr is the variable k, or def when it is unset or empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// UntilClosed is ctx, also cancelled when r reaches its end or fails: r
// is a pipe from the process that started this one (its stdin), which
// the kernel closes when that process dies in any way, kill -9 included
// and on every OS, so a child never outlives its parent for long.
func UntilClosed(ctx context.Context, r io.Reader, lg *zap.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, r)
		if ctx.Err() == nil {
			lg.Info("stdin closed: the process that started this one is gone; stopping")
		}
		cancel()
	}()
	return ctx, cancel
}
