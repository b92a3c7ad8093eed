// Command cast is the user's CLI for cast.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/cast-dev/cast/internal/agents/codecs" // the agents this binary knows
	"github.com/cast-dev/cast/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
