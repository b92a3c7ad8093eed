package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// tokenCertCmd is `cast token cert`: a client certificate for the
// credential the CLI uses now, stored beside the contexts file and used
// by the context instead of its token. The key is made here and never
// sent. The certificate is bound to the token's record: `cast token rm`
// refuses it at once; running the command again before it expires
// renews it (authenticated by the certificate itself).
func (a *app) tokenCertCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "cert [--out FILE]",
		Short: "Get a client certificate (mTLS) for your credential; your context uses it instead of the token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, cur, err := client.NeedContext(os.Getenv, a.context)
			if err != nil {
				return err
			}
			path := configPath()
			if out == "" {
				out = client.BesideConfig(os.Getenv, name+".pem")
			}
			id, err := client.LoadIdentity(out)
			if err != nil {
				return err
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				if a.addr != cur.Addr {
					return usagef("CAST_ADDR or --addr (%s) is not context %s's control plane (%s)", a.addr, name, cur.Addr)
				}
				err := id.Renew(ctx, "cast-user", func(ctx context.Context, csr []byte) ([]byte, error) {
					resp, err := c.Auth.IssueCertificate(ctx, &castv1.IssueCertificateRequest{Csr: csr})
					return resp.GetCertificate(), err
				})
				if err != nil {
					return err
				}
				if err := client.UpdateContext(path, name, func(cc *client.Context) { cc.Cert, cc.Token = out, "" }); err != nil {
					return err
				}
				exp := id.Cert().Leaf.NotAfter.UTC().Format(time.RFC3339)
				if a.json {
					return a.printJSON(map[string]any{"context": name, "cert": out, "expire_time": exp})
				}
				fmt.Fprintf(a.out, "client certificate in %s until %s; context %s uses it instead of its token\n", out, exp, name)
				fmt.Fprintf(a.errOut, "renew it before then with `cast token cert`; `cast token rm` of its token revokes it\n")
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to keep the certificate and its key (0600; default: CONTEXT.pem beside the contexts file)")
	return cmd
}
