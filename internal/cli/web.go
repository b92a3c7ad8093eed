package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// webCmd is `cast web`: a one-time login link to the web timeline for
// your own principal, opened in your browser (--print: printed only). The
// link works once, within a minute; the browser trades it for a session
// cookie (docs/web.md).
func (a *app) webCmd() *cobra.Command {
	var print bool
	cmd := a.calling(&cobra.Command{
		Use:   "web [--print]",
		Short: "Open the web timeline signed in as you (a one-time link; --print prints it)",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		resp, err := c.Auth.CreateWebLogin(ctx, &castv1.CreateWebLoginRequest{})
		return a.replyAs(err, func() any {
			return map[string]any{"url": resp.Url, "expire_time": resp.ExpireTime.AsTime()}
		}, func() error {
			if print || openBrowser(resp.Url) != nil {
				fmt.Fprintln(a.out, resp.Url)
				fmt.Fprintln(a.errOut, "open this link within a minute; it works once")
				return nil
			}
			fmt.Fprintln(a.errOut, "opened the web timeline in your browser")
			return nil
		})
	})
	cmd.Flags().BoolVar(&print, "print", false, "print the link instead of opening a browser")
	return cmd
}

// openBrowser hands url to the desktop's opener; an error means the link
// is printed instead (no desktop, no opener).
func openBrowser(url string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	} else if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no desktop") // xdg-open would pick a text browser, or nothing
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return err
	}
	return exec.Command(path, url).Start() //nolint:gosec // the control plane's own link
}
