package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func (a *app) rmCmd() *cobra.Command {
	var purge bool
	cmd := onSession(&cobra.Command{
		Use:   "rm ID [--purge]",
		Short: "Archive a session: hidden from `cast ls` (see --all), closed to new messages; --purge deletes it",
	}, sessionUse{hint: "cast rm ID; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		return a.call(cmd, func(ctx context.Context, c *client.Client) error {
			resp, err := c.Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: id, Purge: purge})
			return a.replyAs(err, func() any {
				return map[string]any{"id": id, "purged": resp.Purged, "archived": !resp.Purged}
			}, func() error {
				if resp.Purged {
					fmt.Fprintf(a.out, "deleted %s and its messages\n", id)
					return nil
				}
				fmt.Fprintf(a.out, "archived %s\n", id)
				fmt.Fprintf(a.errOut, "`cast ls --all` still lists it, `cast read %s` reads it\n", id)
				return nil
			})
		})
	})

	cmd.Flags().BoolVar(&purge, "purge", false, "delete the session and its messages from the store (cannot be undone)")
	return cmd
}
