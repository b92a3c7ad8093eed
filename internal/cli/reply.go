package cli

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/client"
)

// calling makes cmd's RunE one call to the control plane (a.call), for
// the many commands that are nothing more: run gets the call's context
// and client and cmd's arguments. Commands that check their arguments or
// read files first keep their own RunE and call a.call after.
func (a *app) calling(cmd *cobra.Command, run func(ctx context.Context, c *client.Client, args []string) error) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error { return run(ctx, c, args) })
	}
	return cmd
}

// reply ends a command that prints one answer from the control plane: the
// call's error as is; under --json the answer itself (raw: snake_case, as
// scripts read it); else what human writes for people. resp is read only
// when err is nil, so a failed call's nil answer is never printed.
func (a *app) reply(resp proto.Message, err error, human func() error) error {
	return a.replyAs(err, func() any { return raw(resp) }, human)
}

// replyAs is reply for commands whose JSON is not one API message (a few
// of its fields, or what the command did): asJSON, like human, runs only
// once err is nil, so both may read an answer that is nil on error.
func (a *app) replyAs(err error, asJSON func() any, human func() error) error {
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(asJSON())
	}
	return human()
}
