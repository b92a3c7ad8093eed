package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/version"
)

// versionReport is `cast version --json`.
type versionReport struct {
	Client version.Info  `json:"client"`
	Server *version.Info `json:"server,omitempty"`
	// ServerReplica and CapabilityVersion come from the replica that answered.
	ServerReplica     string `json:"server_replica,omitempty"`
	CapabilityVersion int32  `json:"capability_version,omitempty"`
	// Skew says how client and server builds differ (version.Skew), "" when
	// they do not.
	Skew string `json:"skew,omitempty"`
}

func (a *app) versionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's and the control plane's versions and builds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := versionReport{Client: version.Get()}
			if clientOnly {
				return a.printVersion(rep)
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				sv, err := c.Version.GetVersion(ctx, &castv1.GetVersionRequest{})
				if err != nil {
					_ = a.printVersion(rep) // the client's own build is still worth showing
					return err
				}
				rep.Server = &version.Info{Version: sv.GetVersion(), Revision: sv.GetRevision(), BuildTime: sv.GetBuildTime(),
					Modified: sv.GetModified(), GoVersion: sv.GetGoVersion(), Platform: sv.GetPlatform()}
				rep.ServerReplica, rep.CapabilityVersion = sv.GetReplica(), sv.GetCapabilityVersion()
				rep.Skew = version.Skew(rep.Client, *rep.Server)
				return a.printVersion(rep)
			})
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "the client's version only (no control plane needed)")
	return cmd
}

func (a *app) printVersion(rep versionReport) error {
	if rep.Skew != "" {
		fmt.Fprintf(a.errOut, "warning: %s\n", rep.Skew)
	}
	if a.json {
		return a.printJSON(rep)
	}
	fmt.Fprintf(a.out, "client: %s\n", rep.Client)
	if rep.Server != nil {
		fmt.Fprintf(a.out, "server: %s, replica %s, node protocol %d\n", rep.Server, rep.ServerReplica, rep.CapabilityVersion)
	}
	return nil
}
