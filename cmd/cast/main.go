// Command cast is the user's CLI for cast.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cast-dev/cast/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
